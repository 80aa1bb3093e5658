package breaker

import (
	"strconv"
	"sync"
	"testing"
	"time"
)

func BenchmarkAllowReport(b *testing.B) {
	br := New("p", defaultProfile(APIKey), nil)
	b.ReportAllocs()
	for b.Loop() {
		done, err := br.AllowReportAt(time.Time{})
		if err != nil {
			b.Fatal(err)
		}
		done(Report{Outcome: Success})
	}
}

func BenchmarkAllowReportParallel(b *testing.B) {
	br := New("p", defaultProfile(APIKey), nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			done, err := br.AllowReportAt(time.Time{})
			if err != nil {
				b.Fatal(err)
			}
			done(Report{Outcome: Success})
		}
	})
}

// BenchmarkNaiveMutex is the baseline: a mutex-guarded counter, which is the
// least a thread-safe ask+report can cost.
func BenchmarkNaiveMutex(b *testing.B) {
	var mu sync.Mutex
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		mu.Lock()
		n++
		mu.Unlock()
		mu.Lock()
		n--
		mu.Unlock()
	}
}

func BenchmarkState(b *testing.B) {
	br := New("p", defaultProfile(APIKey), nil)
	b.ReportAllocs()
	for b.Loop() {
		br.StateAt(time.Time{})
	}
}

func newBenchSet() (*Set, []string) {
	s := NewSet(Config{MaxBreakers: 2000})
	names := make([]string, 1000)
	for i := range names {
		names[i] = "provider-" + strconv.Itoa(i)
		s.Get(names[i])
	}
	return s, names
}

func BenchmarkSetState1000(b *testing.B) {
	s, names := newBenchSet()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.StateAt(names[i%len(names)], time.Time{})
		i++
	}
}

func BenchmarkSetState1000Parallel(b *testing.B) {
	s, names := newBenchSet()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			s.StateAt(names[i%len(names)], time.Time{})
			i++
		}
	})
}

func BenchmarkSetAllowReport1000(b *testing.B) {
	s, names := newBenchSet()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		done, _ := s.AllowReportAt(names[i%len(names)], time.Time{})
		done(Report{Outcome: Success})
		i++
	}
}

func BenchmarkSetAllowReport1000Parallel(b *testing.B) {
	s, names := newBenchSet()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			done, _ := s.AllowReportAt(names[i%len(names)], time.Time{})
			done(Report{Outcome: Success})
			i++
		}
	})
}

func BenchmarkGateBlockedUntil(b *testing.B) {
	g := NewGate(GateConfig{Enabled: true})
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	g.RecordFailureAt("openai", "c1", now)
	b.ReportAllocs()
	for b.Loop() {
		g.BlockedUntilAt("openai", "c1", now)
	}
}

func BenchmarkAllowReportDetailed(b *testing.B) {
	br := New("p", defaultProfile(APIKey), nil)
	b.ReportAllocs()
	for b.Loop() {
		done, err := br.AllowReport()
		if err != nil {
			b.Fatal(err)
		}
		done(Report{Outcome: Success, Conn: "c1"})
	}
}

// BenchmarkReportDeduplicated is a router recording a failure that the
// connection window drops.
func BenchmarkReportDeduplicated(b *testing.B) {
	br := New("p", defaultProfile(APIKey), nil)
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	br.ReportAt(Report{Outcome: Failure, Conn: "c1"}, now)
	r := Report{Outcome: Failure, Conn: "c1"}
	b.ReportAllocs()
	for b.Loop() {
		br.ReportAt(r, now)
	}
}

// BenchmarkSetStateRouter is the read a router makes for each candidate:
// the state of one of a few closed providers, at a given time.
func BenchmarkSetStateRouter(b *testing.B) {
	s := NewSet(Config{})
	names := []string{"openai", "anthropic", "gemini", "mistral"}
	now := t0
	for _, n := range names {
		s.StateAt(n, now)
		s.ReportAt(n, Report{Outcome: Failure}, now) // every breaker is held
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.StateAt(names[i&3], now)
		i++
	}
}
