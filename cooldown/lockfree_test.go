package cooldown

import (
	"strconv"
	"sync"
	"testing"
	"time"
)

// A status read of a connection whose shard holds no entry takes no lock:
// it answers while a writer holds that shard.
func TestStatusAtEmptyShardTakesNoLock(t *testing.T) {
	tr := New(Config{})
	tr.FailAt("tracked", rateLimit, t0)
	s := tr.store.(*memoryStore)
	conn := ""
	for i := 0; conn == ""; i++ {
		if c := "c" + strconv.Itoa(i); s.shard(c) != s.shard("tracked") {
			conn = c
		}
	}
	sh := s.shard(conn)
	sh.mu.Lock()
	done := make(chan Status, 1)
	go func() { done <- tr.StatusAt(conn, t0) }()
	select {
	case st := <-done:
		sh.mu.Unlock()
		if st != (Status{}) {
			t.Fatalf("StatusAt(%q) = %+v, want the zero status", conn, st)
		}
	case <-time.After(time.Second):
		sh.mu.Unlock()
		t.Fatal("StatusAt of an untracked connection waited for its shard's lock")
	}
	if st := tr.StatusAt("tracked", t0); st.State != Cooling || !st.Until.After(t0) {
		t.Fatalf("StatusAt(tracked) = %+v, want cooling", st)
	}
}

// Readers of shards that fill and empty run beside the writers (run with
// -race): every read sees a connection either untracked or cooling until
// the end its failure gave, and afterwards each connection reads exactly.
func TestStatusAtShardCountsWithWriters(t *testing.T) {
	tr := New(Config{})
	conns := make([]string, 64)
	for i := range conns {
		conns[i] = "conn-" + strconv.Itoa(i)
	}
	tr.FailAt(conns[0], rateLimit, t0)
	want := tr.StatusAt(conns[0], t0).Until
	tr.ForgetAt(conns[0], t0)
	var readers, writers sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		readers.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				st := tr.StatusAt(conns[i%len(conns)], t0)
				if st != (Status{}) && (st.State != Cooling || !st.Until.Equal(want)) {
					t.Errorf("StatusAt = %+v", st)
					return
				}
			}
		})
	}
	for w := range 2 {
		writers.Go(func() {
			for i := range 500 {
				c := conns[(2*i+w)%len(conns)]
				tr.FailAt(c, rateLimit, t0)
				if i%2 == 0 {
					tr.ForgetAt(c, t0)
				}
			}
		})
	}
	writers.Wait()
	close(stop)
	readers.Wait()
	s := tr.store.(*memoryStore)
	total := 0
	for i := range s.shards {
		sh := &s.shards[i]
		if got, n := int(sh.n.Load()), len(sh.m); got != n {
			t.Errorf("shard %d counts %d entries, holds %d", i, got, n)
		}
		total += len(sh.m)
	}
	if total != s.Len() {
		t.Errorf("shards hold %d entries, Len() = %d", total, s.Len())
	}
	for _, c := range conns {
		tr.ForgetAt(c, t0)
		if st := tr.StatusAt(c, t0); st != (Status{}) {
			t.Errorf("StatusAt(%s) after Forget = %+v", c, st)
		}
	}
}
