package combo

import (
	"sync"
	"sync/atomic"
	"time"
)

// targetKey identifies a target in the router's maps without allocating.
type targetKey struct{ provider, connection, model string }

func keyOf(t *Target) targetKey { return targetKey{t.Provider, t.Connection, t.Model} }

// targetStats are one target's counters. Fields are atomics so strategies
// read them without a lock.
type targetStats struct {
	requests    atomic.Int64
	successes   atomic.Int64
	failures    atomic.Int64
	inFlight    atomic.Int64
	avgLatency  atomic.Int64 // nanoseconds, exponential moving average
	lastSuccess atomic.Int64 // unix nanoseconds
}

// statsTable holds the counters of every target the router has seen,
// bounded by maxStats.
type statsTable struct {
	mu sync.RWMutex
	m  map[targetKey]*targetStats
}

const maxStats = 16384

func (s *statsTable) lookup(t *Target) *targetStats {
	k := keyOf(t)
	s.mu.RLock()
	ts := s.m[k]
	s.mu.RUnlock()
	return ts
}

func (s *statsTable) get(t *Target) *targetStats {
	if ts := s.lookup(t); ts != nil {
		return ts
	}
	k := keyOf(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[targetKey]*targetStats)
	}
	if ts := s.m[k]; ts != nil {
		return ts
	}
	if len(s.m) >= maxStats {
		// Forget idle targets first; if all are busy, forget any.
		for key, v := range s.m {
			if v.inFlight.Load() == 0 {
				delete(s.m, key)
			}
		}
		if len(s.m) >= maxStats {
			clear(s.m)
		}
	}
	ts := &targetStats{}
	s.m[k] = ts
	return ts
}

// latencyWeight is the weight of a new sample in the moving average.
const latencyWeight = 0.2

func (ts *targetStats) success(latency time.Duration, now time.Time) {
	ts.successes.Add(1)
	ts.lastSuccess.Store(now.UnixNano())
	for {
		old := ts.avgLatency.Load()
		next := int64(latency)
		if old != 0 {
			next = int64(float64(old)*(1-latencyWeight) + float64(latency)*latencyWeight)
		}
		if ts.avgLatency.CompareAndSwap(old, next) {
			return
		}
	}
}

func (ts *targetStats) snapshot() Stats {
	s := Stats{
		Requests:   ts.requests.Load(),
		Successes:  ts.successes.Load(),
		Failures:   ts.failures.Load(),
		InFlight:   ts.inFlight.Load(),
		AvgLatency: time.Duration(ts.avgLatency.Load()),
	}
	if ns := ts.lastSuccess.Load(); ns != 0 {
		s.LastSuccess = time.Unix(0, ns)
	}
	return s
}
