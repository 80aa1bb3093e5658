package queue_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/routeguard/routeguard/queue"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func mustTry(t *testing.T, q *queue.Queue, key string, now time.Time) func() {
	t.Helper()
	release, ok := q.TryAcquireAt(key, now)
	require.True(t, ok, key)
	return release
}

// When every kept key is busy at MaxKeys, a new key is refused rather than
// kept past the cap, by every call that would create one, and the refusal
// is typed and reported.
func TestNewKeyRefusedWhenEveryKeyIsBusy(t *testing.T) {
	var rec recorder
	q := queue.New(queue.Config{MaxKeys: 2, OnChange: rec.add})
	a := mustTry(t, q, "a", t0)
	b := mustTry(t, q, "b", t0)

	now := t0.Add(time.Second)
	assert.Equal(t, queue.Refuse, q.CheckAt("new", now))
	assert.Equal(t, queue.Status{Decision: queue.Refuse}, q.StatusAt("new", now))
	rec.take()
	_, err := q.Acquire(context.Background(), "new")
	var qe *queue.Error
	require.True(t, errors.As(err, &qe))
	assert.Equal(t, queue.CodeQueueFull, qe.Code)
	assert.Equal(t, http.StatusTooManyRequests, qe.Status)
	assert.Equal(t, "new", qe.Key)
	assert.Equal(t, 2, qe.Keys)
	assert.Zero(t, qe.Depth)
	assert.ErrorIs(t, err, queue.ErrQueueFull)
	assert.Equal(t, "queue: queue full (2 keys kept, none idle) for new key new", err.Error())
	evs := rec.take()
	require.Len(t, evs, 1)
	assert.Equal(t, queue.EventQueueFull, evs[0].Kind)
	assert.Equal(t, "new", evs[0].Key)
	assert.ErrorIs(t, evs[0].Err, queue.ErrQueueFull)
	assert.Equal(t, 2, evs[0].Err.(*queue.Error).Keys)

	_, ok := q.TryAcquireAt("new", now)
	assert.False(t, ok)
	q.BlockAt("new", now.Add(time.Minute), now)
	q.LearnAt("new", http.StatusOK, hdr("x-ratelimit-limit", "60", "x-ratelimit-remaining", "1"), now)
	_, err = q.AcquireMany(context.Background(), []queue.Need{{Key: "new", Cap: 1}}, queue.ManyOptions{})
	assert.ErrorIs(t, err, queue.ErrQueueFull)
	g, err := q.AcquireMany(context.Background(), []queue.Need{{Key: "new", Cap: 1}}, queue.ManyOptions{FailOpen: true})
	require.NoError(t, err)
	assert.ErrorIs(t, g.Bypassed, queue.ErrQueueFull)
	assert.False(t, g.Held())
	assert.Equal(t, []string{"a", "b"}, keysOf(q.SnapshotAt(now)), "never more than MaxKeys")

	// Once a key is idle, it makes room.
	a()
	assert.Equal(t, queue.Admit, q.CheckAt("new", now))
	release := mustTry(t, q, "new", now)
	assert.Equal(t, []string{"b", "new"}, keysOf(q.SnapshotAt(now)))
	release()
	b()
}

// A blocked key counts as busy until its block is over.
func TestBlockedKeysAreKeptAtTheCap(t *testing.T) {
	q := queue.New(queue.Config{MaxKeys: 1})
	q.BlockAt("a", t0.Add(time.Minute), t0)
	_, ok := q.TryAcquireAt("b", t0.Add(30*time.Second))
	assert.False(t, ok)
	assert.Equal(t, queue.Refuse, q.CheckAt("b", t0.Add(30*time.Second)))
	assert.Equal(t, queue.Admit, q.CheckAt("b", t0.Add(time.Minute)), "the block is over at its end")
	mustTry(t, q, "b", t0.Add(time.Minute))()
	assert.Equal(t, []string{"b"}, keysOf(q.SnapshotAt(t0.Add(time.Minute))))
}

// At the cap, the idle key least recently used goes, never a busy one and
// never the key being taken in.
func TestCapDropsLeastRecentlyUsedIdleKey(t *testing.T) {
	cases := []struct {
		name string
		use  []string // acquired and released in this order, a second apart
		busy string   // held across the new key
		want []string
	}{
		{"oldest goes", []string{"a", "b", "c"}, "", []string{"b", "c", "new"}},
		{"a reuse refreshes", []string{"a", "b", "c", "a"}, "", []string{"a", "c", "new"}},
		{"a busy key stays", []string{"a", "b", "c"}, "a", []string{"a", "c", "new"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := queue.New(queue.Config{MaxKeys: 3})
			now := t0
			for _, k := range c.use {
				now = now.Add(time.Second)
				mustTry(t, q, k, now)()
			}
			var hold func()
			if c.busy != "" {
				now = now.Add(time.Second)
				hold = mustTry(t, q, c.busy, now)
			}
			now = now.Add(time.Second)
			mustTry(t, q, "new", now)()
			assert.Equal(t, c.want, keysOf(q.SnapshotAt(now)))
			if hold != nil {
				hold()
			}
		})
	}
}

// Making room for one key AcquireMany needs never drops another it needs.
func TestAcquireManyNeverDropsItsOwnKeys(t *testing.T) {
	q := queue.New(queue.Config{MaxKeys: 2})
	mustTry(t, q, "x", t0)()
	g, err := q.AcquireMany(context.Background(), []queue.Need{{Key: "a", Cap: 1}, {Key: "b", Cap: 1}}, queue.ManyOptions{})
	require.NoError(t, err)
	assert.True(t, g.Held())
	assert.Equal(t, []string{"a", "b"}, keysOf(q.SnapshotAt(time.Now())))
	g.Release()
	_, err = q.AcquireMany(context.Background(), []queue.Need{{Key: "c", Cap: 1}, {Key: "d", Cap: 1}, {Key: "e", Cap: 1}},
		queue.ManyOptions{})
	assert.ErrorIs(t, err, queue.ErrQueueFull, "three new keys cannot fit in two")
	assert.LessOrEqual(t, len(q.SnapshotAt(time.Now())), 2)
}

// queueModel tracks, by scans, what the queue must guarantee of its keys:
// a key with slots held or a block in force is never dropped, nothing is
// kept past MaxKeys, and a new key is refused exactly when every kept key
// is busy.
type queueModel struct {
	held    map[string][]func()
	blocked map[string]time.Time
}

// Random acquisitions, releases, blocks, unblocks and learned limits keep
// the queue within MaxKeys, never drop a busy key, and refuse a new key
// exactly when the model finds no idle one.
func TestKeysMatchModel(t *testing.T) {
	for seed := range uint64(30) {
		r := rand.New(rand.NewPCG(seed, 5))
		var rec recorder
		q := queue.New(queue.Config{MaxKeys: 1 + int(seed%5), IdleTTL: time.Minute, OnChange: rec.add})
		m := queueModel{held: map[string][]func(){}, blocked: map[string]time.Time{}}
		now := t0
		for step := range 2000 {
			now = now.Add(time.Duration(r.IntN(int(10 * time.Second))))
			k := fmt.Sprint("k", r.IntN(8))
			before := keysOf(q.SnapshotAt(now))
			room := len(before) < 1+int(seed%5)
			for _, b := range before {
				if len(m.held[b]) == 0 && !m.blocked[b].After(now) {
					room = true
				}
			}
			isNew := !slices.Contains(before, k)
			rec.take()
			switch op := r.IntN(10); {
			case op < 4:
				release, ok := q.TryAcquireAt(k, now)
				if isNew {
					require.Equal(t, room, ok, "seed %d step %d: %s admitted", seed, step, k)
				}
				if ok {
					m.held[k] = append(m.held[k], release)
				}
			case op < 6:
				for kk, rs := range m.held {
					if len(rs) > 0 && r.IntN(2) == 0 {
						rs[0]()
						m.held[kk] = rs[1:]
					}
				}
				continue
			case op == 6:
				until := now.Add(time.Duration(r.IntN(int(2 * time.Minute))))
				q.BlockAt(k, until, now)
				if !isNew || room {
					m.blocked[k] = until
				}
			case op == 7:
				q.UnblockAt(k, now)
				delete(m.blocked, k)
				isNew = false // UnblockAt creates no key
			case op == 8:
				q.LearnAt(k, http.StatusOK, hdr("x-ratelimit-limit", "600", "x-ratelimit-remaining", "10"), now)
			default:
				require.Equal(t, room || !isNew, q.CheckAt(k, now) != queue.Refuse, "seed %d step %d", seed, step)
				continue
			}
			after := keysOf(q.SnapshotAt(now))
			require.LessOrEqual(t, len(after), 1+int(seed%5), "seed %d step %d", seed, step)
			if isNew {
				require.Equal(t, room, slices.Contains(after, k), "seed %d step %d: new key %s kept", seed, step, k)
			}
			for _, b := range before {
				if len(m.held[b]) > 0 || m.blocked[b].After(now) {
					require.Contains(t, after, b, "seed %d step %d: busy key dropped", seed, step)
				}
			}
			for _, e := range rec.take() {
				if e.Removed {
					require.NotContains(t, after, e.Key)
					require.Zero(t, e.Running)
				}
			}
			for kk := range m.blocked {
				if !slices.Contains(after, kk) {
					delete(m.blocked, kk)
				}
			}
		}
		for _, rs := range m.held {
			for _, release := range rs {
				release()
			}
		}
	}
}
