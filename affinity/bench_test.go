package affinity

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

func BenchmarkSelectAtHit(b *testing.B) {
	p := New(Config{TTL: time.Hour})
	k, _ := NewKey("header", "bench-session")
	c := cands("A", "B", "C", "D")
	p.SelectAt("openai", k, c, t0)
	now := t0
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond)
		p.SelectAt("openai", k, c, now)
	}
}

func BenchmarkSelectAtHitParallel(b *testing.B) {
	p := New(Config{TTL: time.Hour})
	keys := make([]Key, 1024)
	for i := range keys {
		keys[i], _ = NewKey("header", fmt.Sprint("bench-", i))
	}
	c := cands("A", "B", "C", "D")
	for _, k := range keys {
		p.SelectAt("openai", k, c, t0)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			p.SelectAt("openai", keys[i&1023], c, t0)
			i++
		}
	})
}

func BenchmarkPlanAtHit(b *testing.B) {
	p := New(Config{TTL: time.Hour})
	k, _ := NewKey("header", "bench-session")
	c := cands("A", "B", "C", "D")
	p.SelectAt("openai", k, c, t0)
	r := Request{Provider: "openai", Key: k}
	b.ReportAllocs()
	for b.Loop() {
		p.PlanAt(r, c, t0)
	}
}

func BenchmarkLookupAt(b *testing.B) {
	p := New(Config{TTL: time.Hour})
	k, _ := NewKey("header", "bench-session")
	p.SelectAt("openai", k, cands("A"), t0)
	b.ReportAllocs()
	for b.Loop() {
		p.LookupAt("openai", k, t0)
	}
}

func BenchmarkSelectAtNewPin(b *testing.B) {
	p := New(Config{TTL: time.Hour, MaxPins: 4096})
	keys := make([]Key, 4096)
	for i := range keys {
		keys[i], _ = NewKey("header", fmt.Sprint("bench-", i))
	}
	c := cands("A", "B", "C", "D")
	now := t0
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		// Each key's pin has expired by the time the key comes round again.
		now = now.Add(time.Second)
		p.ChooseAt(Request{Provider: "openai", Key: keys[i&4095], TTL: time.Second}, c, now)
		i++
	}
}

func BenchmarkKeyFromHeader(b *testing.B) {
	h := http.Header{}
	h.Set(headerSession, "0b6c5f0e-6a52-4c1f-9d0b-0f1d2c3b4a59")
	b.ReportAllocs()
	for b.Loop() {
		KeyFrom(h, nil)
	}
}

func BenchmarkKeyFromBody(b *testing.B) {
	body := []byte(`{"model":"gpt-4o","stream":true,"messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Plan a three day trip to Sarajevo."},{"role":"assistant","content":"Day one: the old town."},{"role":"user","content":"And day two?"}]}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		KeyFrom(nil, body)
	}
}

func BenchmarkTTLFor(b *testing.B) {
	s := Config{TTL: time.Hour, ProviderTTL: map[string]time.Duration{"claude": 0, "codex": time.Minute}}.Normalize()
	b.ReportAllocs()
	for b.Loop() {
		s.TTLFor("codex", 0)
	}
}
