package watchdog

import (
	"io"
	"testing"
	"time"
)

// chatChunk is a typical 200-byte Chat Completions delta event.
var chatChunk = []byte(`data: {"id":"chatcmpl-9x1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Hello there, world!"},"logprobs":null,"finish_reason":null}]}` + "\n\n")

func benchConfig() Config {
	return Config{Throughput: true, IdleTimeout: time.Minute, AttemptDeadline: 100000 * time.Hour}
}

func BenchmarkObserveChatChunk(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(chatChunk)))
	o := NewObserver(benchConfig())
	now := t0
	for b.Loop() {
		now = now.Add(10 * time.Millisecond)
		if err := o.ObserveAt(chatChunk, now); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkObserveSplitChunk feeds each event in two pieces, so the tail
// is carried between chunks.
func BenchmarkObserveSplitChunk(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(chatChunk)))
	o := NewObserver(benchConfig())
	now := t0
	half := len(chatChunk) / 2
	for b.Loop() {
		now = now.Add(10 * time.Millisecond)
		_ = o.ObserveAt(chatChunk[:half], now)
		if err := o.ObserveAt(chatChunk[half:], now); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkObserveDisabled(b *testing.B) {
	b.ReportAllocs()
	o := NewObserver(Config{})
	now := t0
	for b.Loop() {
		now = now.Add(10 * time.Millisecond)
		_ = o.ObserveAt(chatChunk, now)
	}
}

func BenchmarkClassify(b *testing.B) {
	b.ReportAllocs()
	data := chatChunk[len("data: ") : len(chatChunk)-2]
	for b.Loop() {
		if classify(data, nil).useful != 19 {
			b.Fatal("wrong count")
		}
	}
}

// repeatReader returns chunk on every Read, forever.
type repeatReader struct{ chunk []byte }

func (r *repeatReader) Read(p []byte) (int, error) { return copy(p, r.chunk), nil }
func (r *repeatReader) Close() error               { return nil }

// BenchmarkRead compares a bare upstream Read with the wrapped one.
func BenchmarkRead(b *testing.B) {
	buf := make([]byte, 4096)
	b.Run("bare", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(chatChunk)))
		var r io.Reader = &repeatReader{chatChunk}
		for b.Loop() {
			_, _ = r.Read(buf)
		}
	})
	b.Run("wrapped-disabled", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(chatChunk)))
		body := Wrap(&repeatReader{chatChunk}, Config{}, Options{})
		defer body.Close()
		for b.Loop() {
			_, _ = body.Read(buf)
		}
	})
	b.Run("wrapped-enabled", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(chatChunk)))
		cfg := benchConfig()
		cfg.IdleTimeout, cfg.AttemptDeadline = 0, 0
		cfg.Window = maxWindow
		body := Wrap(&repeatReader{chatChunk}, cfg, Options{})
		defer body.Close()
		for b.Loop() {
			if _, err := body.Read(buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestObserveAllocatesNothing(t *testing.T) {
	o := NewObserver(benchConfig())
	now := t0
	half := len(chatChunk) / 2
	step := func() {
		now = now.Add(10 * time.Millisecond)
		_ = o.ObserveAt(chatChunk[:half], now)
		_ = o.ObserveAt(chatChunk[half:], now)
		_ = o.ObserveAt(chatChunk, now)
		_ = o.CheckAt(now)
		_, _ = o.DueAt(now)
	}
	step() // grows the tail buffer once
	if n := testing.AllocsPerRun(500, step); n != 0 {
		t.Fatalf("ObserveAt allocates %v times per run", n)
	}
	if err := o.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestBodyReadAllocatesNothing(t *testing.T) {
	cfg := Config{Throughput: true, Window: maxWindow}
	body := Wrap(&repeatReader{chatChunk}, cfg, Options{})
	defer body.Close()
	buf := make([]byte, 4096)
	if n := testing.AllocsPerRun(500, func() { _, _ = body.Read(buf) }); n != 0 {
		t.Fatalf("Read allocates %v times per run", n)
	}
}
