package cooldowntest_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/cooldown/cooldowntest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMemoryStore(t *testing.T) {
	cooldowntest.Run(t, func() cooldown.Store { return cooldown.NewMemoryStore() })
}

// plainStore hides the optional interfaces of the memory store.
type plainStore struct{ s cooldown.Store }

func (p plainStore) Load(conn string) (cooldown.Entry, bool) { return p.s.Load(conn) }
func (p plainStore) Update(conn string, fn func(*cooldown.Entry, bool) bool) {
	p.s.Update(conn, fn)
}
func (p plainStore) Range(fn func(string, cooldown.Entry) bool) { p.s.Range(fn) }

func TestPlainStore(t *testing.T) {
	cooldowntest.Run(t, func() cooldown.Store { return plainStore{cooldown.NewMemoryStore()} })
}

func BenchmarkMemoryStoreUpdate(b *testing.B) {
	s := cooldown.NewMemoryStore()
	fn := func(e *cooldown.Entry, _ bool) bool { e.Level++; return true }
	b.ReportAllocs()
	for b.Loop() {
		s.Update("openai:k1", fn)
	}
}

func TestCountingStore(t *testing.T) {
	cooldowntest.Run(t, func() cooldown.Store { return newCountingStore() })
}
