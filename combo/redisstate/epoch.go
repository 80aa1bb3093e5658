package redisstate

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/routeguard/routeguard/lease"
)

// DataLoss describes a lost lease dataset, as Config.OnDataLoss reports
// it: Redis answered with another epoch than the one this process knew
// (it restarted empty, or a replica without the data took over).
type DataLoss struct {
	// At is the caller's now of the call that noticed it.
	At time.Time
	// Previous and Epoch are the epochs before and after.
	Previous, Epoch string
	// Reseeded counts the leases of this process stored again as they
	// were; Conflicts those refused because their owner or connection had
	// been taken meanwhile (their holders' next renew is refused).
	Reseeded, Conflicts int
	// Err is the error of the re-seed, if it failed (it is tried again on
	// the next call).
	Err error
}

// adopt handles a script's reply that the dataset epoch is e at now. On
// a process's first call it only records e; when e replaces an epoch this
// process knew, the dataset was lost: the leases this process holds are
// re-seeded, the fence mirror is dropped, the state is reported degraded
// until the re-seed succeeds, and Config.OnDataLoss is called.
func (ls *leaseStore) adopt(ctx context.Context, e string, now time.Time) error {
	ls.epochMu.Lock()
	prev, _ := ls.epoch.Load().(string)
	if prev == e || prev == "" {
		ls.epoch.Store(e)
		ls.epochMu.Unlock()
		return nil
	}
	ls.s.setDegraded(true)
	ev := DataLoss{At: now, Previous: prev}
	ev.Epoch, ev.Reseeded, ev.Conflicts, ev.Err = ls.reseed(ctx, e, now)
	if ev.Err == nil {
		ls.epoch.Store(ev.Epoch)
	}
	ls.epochMu.Unlock()
	if hook := ls.s.cfg.OnDataLoss; hook != nil {
		hook(ev)
	}
	return ev.Err
}

// reseed stores the live leases this process holds again in the dataset
// of epoch e, in batches, and returns the epoch it ended in. It requires
// ls.epochMu.
func (ls *leaseStore) reseed(ctx context.Context, e string, now time.Time) (string, int, int, error) {
	ls.mu.Lock()
	var live []any
	for o, l := range ls.kept {
		if now.Before(l.ExpiresAt) {
			live = append(live, o.String(), encodeLease(l))
		} else {
			delete(ls.kept, o)
		}
	}
	floor := strconv.FormatUint(ls.maxGen, 10)
	clear(ls.mirror)
	ls.mu.Unlock()
	restored, conflicts := 0, 0
	for i := 0; i < len(live) || i == 0; i += 2 * batch {
		part := live[i:min(i+2*batch, len(live))]
		var out []string
		var err error
		for range 4 {
			out, err = ls.eval(ctx, scriptRestore, []string{ls.meta, ls.act}, ls.argsIn(e, now, append([]any{floor}, part...)...))
			if err != nil || out[0] != "EPOCH" {
				break
			}
			e = out[1] // lost again meanwhile
		}
		if err != nil {
			return e, restored, conflicts, err
		}
		if out[0] != "RESTORED" || len(out) < 3 {
			return e, restored, conflicts, leaseFailure(&unavailableError{errDataset})
		}
		n, _ := strconv.Atoi(out[1])
		c, _ := strconv.Atoi(out[2])
		restored, conflicts = restored+n, conflicts+c
	}
	return e, restored, conflicts, nil
}

type datasetError struct{}

func (datasetError) Error() string { return "the dataset epoch keeps changing" }

var errDataset error = datasetError{}

func msStr(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixMilli(), 10)
}

// encodeLease is decodeLease's inverse.
func encodeLease(l lease.Lease) string {
	b, _ := json.Marshal(wire{
		C: l.Connection, K: l.APIKeyID, P: l.Provider, G: strconv.FormatUint(l.Generation, 10),
		S: string(l.State), A: msStr(l.AcquiredAt), R: msStr(l.RenewedAt), X: msStr(l.ExpiresAt),
		E: msStr(l.EndedAt), W: string(l.EndReason),
	})
	return string(b)
}
