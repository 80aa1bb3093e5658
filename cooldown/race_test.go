package cooldown

import (
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestConcurrentUse hammers one Tracker from several goroutines, with a
// small entry cap so that sweeps run among the writes, and an egress family
// shared by all of them; run it with -race. Each goroutine's banned
// connection must stay banned.
func TestConcurrentUse(t *testing.T) {
	tr := New(Config{MaxEntries: 16})
	const workers, rounds = 8, 400
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			id := strconv.Itoa(w)
			banned, family := "banned-"+id, "family-"+id
			tr.RegisterAt(family, Options{Provider: "opencode-go"}, t0)
			tr.FailAt(banned, Failure{Status: 403, Reason: "auth_error", Permanent: true}, t0)
			cands := []string{"k-" + id, family, banned, "family-0"}
			now := t0
			for i := range rounds {
				now = now.Add(time.Second)
				c := cands[i%len(cands)]
				switch i % 7 {
				case 0:
					tr.FailAt(c, rateLimit, now)
				case 1:
					tr.SeenEgressAt(c, "1.2.3.4", now)
				case 2:
					tr.FailAt(family, egressLimit, now)
				case 3:
					_ = tr.CheckAt(c, now)
				case 4:
					tr.SucceedAt(c, now)
				case 5:
					tr.ClearAt(Selector{IDs: []string{c}}, now)
				case 6:
					tr.SnapshotAt(now)
				}
				if s := tr.StatusAt(banned, now); s.State != Banned {
					t.Errorf("%s: %v after %d rounds", banned, s, i)
					return
				}
			}
			// The cap may evict this entry as soon as another goroutine
			// writes, so only the answer is checked.
			r := tr.FailAt("last-"+id, Failure{Status: 429, Reason: "quota_exhausted", Cooldown: time.Hour}, now)
			if want := (Status{State: Cooling, Until: now.Add(time.Hour), Reason: "quota_exhausted"}); r.Status != want || r.Action != Episode {
				t.Errorf("last-%s: %v %v, want an episode to %v", id, r.Action, r.Status, want)
			}
		})
	}
	wg.Wait()
}
