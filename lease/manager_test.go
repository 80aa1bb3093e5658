package lease_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lease/leasetest"
)

var (
	ctx   = context.Background()
	T0    = leasetest.T0
	hashA = lease.HashOwner(leasetest.Owner('A'))
	hashB = lease.HashOwner(leasetest.Owner('B'))
)

// claimT is what an acquire asks for.
type claimT struct {
	h        lease.Holder
	provider string
	cands    []string
}

// connectionIneligible is the end reason of a lease the Manager moves or
// gives up.
const connectionIneligible = lease.Reason("CONNECTION_INELIGIBLE")

// assertAuthMismatch checks the refusal for the right owner and generation
// presented through another API key: LEASE_FENCE_STALE, 409, with the
// documented Detail.
func assertAuthMismatch(t *testing.T, err error) {
	t.Helper()
	var le *lease.Error
	require.ErrorAs(t, err, &le)
	assert.Equal(t, lease.CodeFenceStale, le.Code)
	assert.Equal(t, 409, le.Status)
	assert.Equal(t, "lease held under another api key", le.Detail)
	assert.ErrorIs(t, err, lease.ErrFenceStale)
}

func claim(owner lease.OwnerHash, key string, cands ...string) claimT {
	return claimT{h: lease.Holder{Owner: owner, APIKeyID: key}, provider: "openai", cands: cands}
}

// manager is a Manager that records its events.
type manager struct {
	*lease.Manager
	mu     sync.Mutex
	events []lease.Event
}

func newManager(c lease.Config) *manager {
	m := &manager{}
	next := c.OnChange
	c.OnChange = func(e lease.Event) {
		m.mu.Lock()
		m.events = append(m.events, e)
		m.mu.Unlock()
		if next != nil {
			next(e)
		}
	}
	m.Manager = lease.New(c)
	return m
}

// kind names the change an event reports, in the contract's words.
func kind(e lease.Event) string {
	switch {
	case e.Removed:
		return string(e.State)
	case e.Previous.State != "":
		return "TRANSITIONED"
	case e.From == "":
		return "ACQUIRED"
	}
	return "RENEWED"
}

// acquire runs AcquireAt and returns the kind of the change it made ("" for
// none).
func (m *manager) acquire(c claimT, now time.Time) (lease.Lease, string, error) {
	m.mu.Lock()
	n := len(m.events)
	m.mu.Unlock()
	l, err := m.AcquireAt(ctx, c.h, c.provider, c.cands, now)
	m.mu.Lock()
	defer m.mu.Unlock()
	res := ""
	if len(m.events) > n {
		res = kind(m.events[len(m.events)-1])
	}
	return l, res, err
}

func TestAcquireScenarioNewAndReused(t *testing.T) {
	m := newManager(lease.Config{})
	l, res, err := m.acquire(claim(hashA, "k1", "c1"), T0)
	require.NoError(t, err)
	assert.Equal(t, "ACQUIRED", res)
	assert.Equal(t, uint64(1), l.Generation)
	assert.Equal(t, T0.Add(120*time.Second), l.ExpiresAt)

	l, res, err = m.acquire(claim(hashA, "k1", "c1"), T0.Add(time.Second))
	require.NoError(t, err)
	assert.Equal(t, "RENEWED", res, "acquiring again renews")
	assert.Equal(t, uint64(1), l.Generation)
	assert.Equal(t, T0.Add(121*time.Second), l.ExpiresAt)
}

func TestAcquireSecondKeyKeepsBinding(t *testing.T) {
	m := newManager(lease.Config{})
	first, _, err := m.acquire(claim(hashA, "k1", "c1"), T0)
	require.NoError(t, err)
	_, _, err = m.acquire(claim(hashA, "k2", "c2"), T0.Add(time.Second))
	assert.ErrorIs(t, err, lease.ErrOwnerAlreadyActive)
	got, err := m.StatusAt(ctx, lease.Holder{Owner: hashA, APIKeyID: "k1", Generation: 1}, T0.Add(time.Second))
	require.NoError(t, err)
	assert.Equal(t, first, got)
}

func TestAcquireCapacity(t *testing.T) {
	m := newManager(lease.Config{})
	_, _, err := m.acquire(claim(hashA, "k1", "c1"), T0)
	require.NoError(t, err)
	_, _, err = m.acquire(claim(hashB, "k1", "c1"), T0.Add(30*time.Second))
	var ce *lease.Error
	require.ErrorAs(t, err, &ce)
	assert.ErrorIs(t, err, lease.ErrCapacityUnavailable)
	assert.Equal(t, lease.CodeCapacityUnavailable, ce.Code)
	assert.Equal(t, 429, ce.Status)
	assert.Equal(t, T0.Add(120*time.Second), ce.Until)
	assert.Equal(t, 90*time.Second, ce.RetryAfter)
	assert.Equal(t, 1, ce.Eligible)
	assert.Equal(t, 0, ce.Free)
}

// Nine connections take nine owners on nine distinct connections; the
// tenth waits until the earliest occupant expires.
func TestAcquireCapacityScalesPerConnection(t *testing.T) {
	m := newManager(lease.Config{})
	var conns []string
	for i := range 9 {
		conns = append(conns, fmt.Sprintf("c%d", i))
	}
	held := map[string]bool{}
	for i := range 9 {
		l, res, err := m.acquire(claim(lease.HashOwner(fmt.Sprint("owner", i)), "k1", conns...), T0.Add(time.Duration(i)*time.Second))
		require.NoError(t, err)
		assert.Equal(t, "ACQUIRED", res)
		assert.False(t, held[l.Connection], "connection %s leased twice", l.Connection)
		held[l.Connection] = true
	}
	_, _, err := m.acquire(claim(lease.HashOwner("owner9"), "k1", conns...), T0.Add(10*time.Second))
	var ce *lease.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, lease.CodeCapacityUnavailable, ce.Code)
	assert.Equal(t, T0.Add(120*time.Second), ce.Until)
	assert.Equal(t, 110*time.Second, ce.RetryAfter)
	assert.Equal(t, 9, ce.Eligible)
}

// Scenario 11: connection top is leased by A, so B gets next.
func TestAcquireSkipsForeignLease(t *testing.T) {
	m := newManager(lease.Config{})
	_, _, err := m.acquire(claim(hashA, "k1", "top"), T0)
	require.NoError(t, err)
	l, res, err := m.acquire(claim(hashB, "k1", "top", "next"), T0)
	require.NoError(t, err)
	assert.Equal(t, "ACQUIRED", res)
	assert.Equal(t, "next", l.Connection)
	assert.Equal(t, uint64(1), l.Generation)
}

func TestAcquireRejectsBadClaims(t *testing.T) {
	m := newManager(lease.Config{})
	_, _, err := m.acquire(claim(lease.OwnerHash{}, "k1", "c1"), T0)
	assert.ErrorIs(t, err, lease.ErrContextRequired)
	_, _, err = m.acquire(claim(hashA, "k1"), T0)
	assert.ErrorIs(t, err, lease.ErrNoEligibleConnection)
}

func TestAcquireMovesWhenBoundConnectionIneligible(t *testing.T) {
	m := newManager(lease.Config{})
	_, _, err := m.acquire(claim(hashA, "k1", "c1", "c2"), T0)
	require.NoError(t, err)
	l, res, err := m.acquire(claim(hashA, "k1", "c2"), T0.Add(time.Second))
	require.NoError(t, err)
	assert.Equal(t, "TRANSITIONED", res)
	assert.Equal(t, "c2", l.Connection)
	assert.Equal(t, uint64(1), l.Generation)
}

func TestAcquireConfigTTL(t *testing.T) {
	m := newManager(lease.Config{TTL: 10 * time.Second})
	l, _, err := m.acquire(claim(hashA, "k1", "c1"), T0)
	require.NoError(t, err)
	assert.Equal(t, T0.Add(10*time.Second), l.ExpiresAt)
	m = newManager(lease.Config{TTL: time.Hour})
	l, _, err = m.acquire(claim(hashB, "k1", "c2"), T0)
	require.NoError(t, err)
	assert.Equal(t, T0.Add(30*time.Minute), l.ExpiresAt, "clamped to 30 min")
}

func TestFenceAt(t *testing.T) {
	m := newManager(lease.Config{})
	h := lease.Holder{Owner: hashA, APIKeyID: "k1", Generation: 1}
	assert.ErrorIs(t, m.FenceAt(ctx, h, "c1", T0), lease.ErrRequired)
	_, _, err := m.acquire(claim(hashA, "k1", "c1"), T0)
	require.NoError(t, err)
	at := T0.Add(time.Second)
	assert.NoError(t, m.FenceAt(ctx, h, "c1", at))
	assert.NoError(t, m.FenceAt(ctx, h, "", at), "empty connection checks only owner, key, generation")
	assert.ErrorIs(t, m.FenceAt(ctx, lease.Holder{Owner: hashA, APIKeyID: "k1", Generation: 2}, "c1", at), lease.ErrFenceStale)
	assertAuthMismatch(t, m.FenceAt(ctx, lease.Holder{Owner: hashA, APIKeyID: "k2", Generation: 1}, "c1", at))
	assert.ErrorIs(t, m.FenceAt(ctx, h, "c2", at), lease.ErrConnectionMismatch)
	assert.ErrorIs(t, m.FenceAt(ctx, lease.Holder{Owner: hashB, APIKeyID: "k1", Generation: 1}, "c1", at), lease.ErrRequired)
	assert.ErrorIs(t, m.FenceAt(ctx, lease.Holder{APIKeyID: "k1", Generation: 1}, "c1", at), lease.ErrContextRequired)
	assert.ErrorIs(t, m.FenceAt(ctx, h, "c1", T0.Add(120*time.Second)), lease.ErrRequired, "expired")
}

func TestFenceAtAllocatesNothing(t *testing.T) {
	m := newManager(lease.Config{})
	_, _, err := m.acquire(claim(hashA, "k1", "c1"), T0)
	require.NoError(t, err)
	valid := lease.Holder{Owner: hashA, APIKeyID: "k1", Generation: 1}
	stale := lease.Holder{Owner: hashA, APIKeyID: "k1", Generation: 2}
	otherKey := lease.Holder{Owner: hashA, APIKeyID: "k2", Generation: 1}
	at := T0.Add(time.Second)
	allocs := testing.AllocsPerRun(1000, func() {
		if m.FenceAt(ctx, valid, "c1", at) != nil || m.FenceAt(ctx, stale, "c1", at) == nil ||
			m.FenceAt(ctx, valid, "c9", at) == nil || m.FenceAt(ctx, otherKey, "c1", at) == nil {
			t.Fatal("unexpected fence verdict")
		}
	})
	assert.Zero(t, allocs)
}

// mismatchStore answers every Fence with the authorization mismatch as a
// Store outside the package builds it: no Status.
type mismatchStore struct{ lease.Store }

var storeMismatch = &lease.Error{Code: lease.CodeFenceStale, Detail: "lease held under another api key"}

func (mismatchStore) Fence(context.Context, lease.Holder, string, time.Time) error {
	return storeMismatch
}

// A Store's status-less authorization mismatch becomes the package's own
// refusal (409, same Detail) without allocating or touching the store's
// value.
func TestFenceAtStoreAuthorizationMismatch(t *testing.T) {
	m := lease.New(lease.Config{Store: mismatchStore{lease.NewMemoryStore(lease.Config{})}})
	h := lease.Holder{Owner: hashA, APIKeyID: "k2", Generation: 1}
	assertAuthMismatch(t, m.FenceAt(ctx, h, "c1", T0))
	assert.Zero(t, storeMismatch.Status, "the store's value is not modified")
	allocs := testing.AllocsPerRun(1000, func() {
		if m.FenceAt(ctx, h, "c1", T0) == nil {
			t.Fatal("fence passed")
		}
	})
	assert.Zero(t, allocs)
}

// Scenario 12: the bound connection becomes ineligible; the next request
// is served on a free sibling with the same generation.
func TestSelectMovesToFreeSibling(t *testing.T) {
	var events []lease.Event
	m := newManager(lease.Config{OnChange: func(e lease.Event) { events = append(events, e) }})
	l, _, err := m.acquire(claim(hashA, "k1", "c1", "c2", "c3"), T0)
	require.NoError(t, err)
	require.Equal(t, "c1", l.Connection)
	_, _, err = m.acquire(claim(hashB, "k1", "c2"), T0)
	require.NoError(t, err)

	h := lease.Holder{Owner: hashA, APIKeyID: "k1", Generation: l.Generation}
	same, err := m.SelectAt(ctx, h, "openai", []string{"c1", "c2", "c3"}, T0.Add(time.Second))
	require.NoError(t, err)
	assert.Equal(t, l, same, "bound connection still eligible: lease unchanged")

	// c1 is now rate limited, so the caller leaves it out.
	moved, err := m.SelectAt(ctx, h, "openai", []string{"c2", "c3"}, T0.Add(2*time.Second))
	require.NoError(t, err)
	assert.Equal(t, "c3", moved.Connection)
	assert.Equal(t, l.Generation, moved.Generation)
	assert.NoError(t, m.FenceAt(ctx, h, "c3", T0.Add(2*time.Second)))
	assert.ErrorIs(t, m.FenceAt(ctx, h, "c1", T0.Add(2*time.Second)), lease.ErrConnectionMismatch)

	require.Len(t, events, 3)
	mv := events[2]
	assert.Equal(t, "TRANSITIONED", kind(mv))
	assert.Equal(t, T0.Add(2*time.Second), mv.At)
	assert.Equal(t, lease.StateActive, mv.From)
	assert.False(t, mv.Removed)
	assert.Equal(t, moved, mv.Lease, "the event carries the lease after the move")
	assert.Equal(t, "c1", mv.Previous.Connection)
	assert.Equal(t, lease.StateInvalidated, mv.Previous.State)
	assert.Equal(t, connectionIneligible, mv.Previous.EndReason)
}

func TestSelectWithoutFreeCandidateInvalidates(t *testing.T) {
	var events []lease.Event
	m := newManager(lease.Config{OnChange: func(e lease.Event) { events = append(events, e) }})
	l, _, err := m.acquire(claim(hashA, "k1", "c1"), T0)
	require.NoError(t, err)
	_, _, err = m.acquire(claim(hashB, "k1", "c2"), T0.Add(10*time.Second))
	require.NoError(t, err)
	h := lease.Holder{Owner: hashA, APIKeyID: "k1", Generation: l.Generation}
	_, err = m.SelectAt(ctx, h, "openai", []string{"c2"}, T0.Add(20*time.Second))
	var ce *lease.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, lease.CodeCapacityUnavailable, ce.Code)
	assert.Equal(t, 110*time.Second, ce.RetryAfter)
	assert.Equal(t, T0.Add(130*time.Second), ce.Until)
	assert.Equal(t, 1, ce.Eligible)
	assert.Equal(t, 0, ce.Free)
	assert.ErrorIs(t, m.FenceAt(ctx, h, "c1", T0.Add(20*time.Second)), lease.ErrRequired, "lease invalidated")

	require.Len(t, events, 3)
	inv := events[2]
	assert.Equal(t, "INVALIDATED", kind(inv))
	assert.True(t, inv.Removed)
	assert.Equal(t, lease.StateActive, inv.From)
	assert.Equal(t, T0.Add(20*time.Second), inv.At)
	assert.Equal(t, lease.StateInvalidated, inv.Lease.State)
	assert.Equal(t, connectionIneligible, inv.Lease.EndReason)
	assert.Equal(t, T0.Add(20*time.Second), inv.Lease.EndedAt)
	assert.Equal(t, "c1", inv.Lease.Connection)

	// The next acquisition is a new generation.
	l2, res, err := m.acquire(claim(hashA, "k1", "c1"), T0.Add(21*time.Second))
	require.NoError(t, err)
	assert.Equal(t, "ACQUIRED", res)
	assert.Equal(t, l.Generation+1, l2.Generation)
}

// Scenario 13: the only connection is banned, so nothing is eligible; the
// answer is not lease contention and the lease is kept.
func TestSelectWithoutCandidatesIsNotContention(t *testing.T) {
	m := newManager(lease.Config{})
	l, _, err := m.acquire(claim(hashA, "k1", "c1"), T0)
	require.NoError(t, err)
	h := lease.Holder{Owner: hashA, APIKeyID: "k1", Generation: l.Generation}
	_, err = m.SelectAt(ctx, h, "openai", nil, T0.Add(time.Second))
	assert.ErrorIs(t, err, lease.ErrNoEligibleConnection)
	assert.NotErrorIs(t, err, lease.ErrCapacityUnavailable)
	assert.NoError(t, m.FenceAt(ctx, h, "c1", T0.Add(time.Second)))
}

func TestSelectFence(t *testing.T) {
	m := newManager(lease.Config{})
	_, err := m.SelectAt(ctx, lease.Holder{Owner: hashA, APIKeyID: "k1", Generation: 1}, "openai", []string{"c1"}, T0)
	assert.ErrorIs(t, err, lease.ErrRequired)
	_, _, err = m.acquire(claim(hashA, "k1", "c1"), T0)
	require.NoError(t, err)
	_, err = m.SelectAt(ctx, lease.Holder{Owner: hashA, APIKeyID: "k1", Generation: 2}, "openai", []string{"c1"}, T0)
	assert.ErrorIs(t, err, lease.ErrFenceStale)
	_, err = m.SelectAt(ctx, lease.Holder{Owner: hashA, APIKeyID: "k2", Generation: 1}, "openai", []string{"c1"}, T0)
	assertAuthMismatch(t, err)
	_, err = m.SelectAt(ctx, lease.Holder{APIKeyID: "k2", Generation: 1}, "openai", []string{"c1"}, T0)
	assert.ErrorIs(t, err, lease.ErrContextRequired)
}

// Scenario 4 through the Manager, with the events it reports.
func TestRenewReleaseLifecycle(t *testing.T) {
	var events []string
	m := newManager(lease.Config{OnChange: func(e lease.Event) { events = append(events, kind(e)) }})
	l, _, err := m.acquire(claim(hashA, "k1", "c1"), T0)
	require.NoError(t, err)
	g := l.Generation
	h := lease.Holder{Owner: hashA, APIKeyID: "k1", Generation: g}
	at := T0.Add(time.Minute)

	_, err = m.RenewAt(ctx, lease.Holder{Owner: hashA, APIKeyID: "k1", Generation: g + 1}, at)
	assert.ErrorIs(t, err, lease.ErrFenceStale)
	r, err := m.RenewAt(ctx, h, at)
	require.NoError(t, err)
	assert.Equal(t, at.Add(120*time.Second), r.ExpiresAt)
	assert.Equal(t, at, r.RenewedAt)

	_, err = m.ReleaseAt(ctx, lease.Holder{Owner: hashA, APIKeyID: "k1", Generation: g - 1}, "", at)
	assert.ErrorIs(t, err, lease.ErrFenceStale)
	_, err = m.ReleaseAt(ctx, h, "BECAUSE", at)
	assert.ErrorIs(t, err, lease.ErrInvalidConfig)
	assert.EqualError(t, err, `lease: invalid_config: reason: not OWNER_EXIT or CLIENT_CANCELLED`)
	rel, err := m.ReleaseAt(ctx, h, "", at)
	require.NoError(t, err)
	assert.Equal(t, lease.StateReleased, rel.State)
	assert.Equal(t, lease.ReasonOwnerExit, rel.EndReason)
	again, err := m.ReleaseAt(ctx, h, lease.ReasonClientCancelled, at.Add(time.Second))
	require.NoError(t, err)
	assert.Equal(t, rel, again)
	_, err = m.StatusAt(ctx, h, at)
	assert.ErrorIs(t, err, lease.ErrFenceStale)

	assert.Equal(t, []string{"ACQUIRED", "RENEWED", "RELEASED"}, events)
	rec := m.events[len(m.events)-1]
	assert.Equal(t, lease.Event{Lease: rel, At: at, From: lease.StateActive, Removed: true}, rec)
}

// Scenario 5 through the Manager: a move keeps the generation, and the
// fence then refuses the old connection and another API key.
func TestSelectMoveKeepsGeneration(t *testing.T) {
	m := newManager(lease.Config{})
	l, _, err := m.acquire(claim(hashA, "k1", "c-b"), T0)
	require.NoError(t, err)
	h := lease.Holder{Owner: hashA, APIKeyID: "k1", Generation: l.Generation}
	at := T0.Add(time.Second)
	moved, err := m.SelectAt(ctx, h, "openai", []string{"c-c"}, at)
	require.NoError(t, err)
	require.Len(t, m.events, 2)
	assert.Equal(t, "TRANSITIONED", kind(m.events[1]))
	assert.Equal(t, connectionIneligible, m.events[1].Previous.EndReason)
	assert.Equal(t, "c-c", moved.Connection)
	assert.Equal(t, l.Generation, moved.Generation)
	assert.Equal(t, at.Add(120*time.Second), moved.ExpiresAt, "a fresh TTL")
	assert.ErrorIs(t, m.FenceAt(ctx, h, "c-b", at), lease.ErrConnectionMismatch)
	assert.NoError(t, m.FenceAt(ctx, h, "c-c", at))
	assertAuthMismatch(t, m.FenceAt(ctx, lease.Holder{Owner: hashA, APIKeyID: "k2", Generation: l.Generation}, "c-c", at))
	same, err := m.SelectAt(ctx, h, "openai", []string{"c-d", "c-c"}, at)
	require.NoError(t, err)
	assert.Equal(t, moved, same, "the leased connection among the candidates changes nothing")
	assert.Len(t, m.events, 2, "and reports nothing")

	_, err = m.SelectAt(ctx, lease.Holder{Owner: hashA, APIKeyID: "k1", Generation: 9}, "openai", []string{"c-e"}, at)
	assert.ErrorIs(t, err, lease.ErrFenceStale)
	assert.Len(t, m.events, 2, "a stale holder moves nothing")
}

func TestGenerationsAcrossReleaseAndInvalidate(t *testing.T) {
	m := newManager(lease.Config{})
	for want := uint64(1); want <= 3; want++ {
		l, _, err := m.acquire(claim(hashA, "k1", "c1"), T0.Add(time.Duration(want)*time.Second))
		require.NoError(t, err)
		require.Equal(t, want, l.Generation)
		h := lease.Holder{Owner: hashA, APIKeyID: "k1", Generation: want}
		if want == 1 {
			_, err = m.ReleaseAt(ctx, h, lease.ReasonOwnerExit, T0.Add(time.Duration(want)*time.Second))
		} else {
			_, err = m.InvalidateAt(ctx, h, "QUOTA_UNAVAILABLE", T0.Add(time.Duration(want)*time.Second))
		}
		require.NoError(t, err)
	}
	_, err := m.InvalidateAt(ctx, lease.Holder{Owner: hashA, Generation: 3}, "QUOTA_UNAVAILABLE", T0.Add(time.Minute))
	assert.ErrorIs(t, err, lease.ErrFenceStale)
	_, err = m.InvalidateAt(ctx, lease.Holder{Owner: hashA, Generation: 3}, "NOPE", T0.Add(time.Minute))
	assert.ErrorIs(t, err, lease.ErrInvalidConfig)
	_, err = m.InvalidateAt(ctx, lease.Holder{Owner: hashA, Generation: 3}, lease.Reason("TTL_EXPIRED"), T0.Add(time.Minute))
	assert.ErrorIs(t, err, lease.ErrInvalidConfig)
}

// Scenario 6 through the Manager, with EXPIRED events.
func TestReconcileAt(t *testing.T) {
	var expired []lease.Event
	m := newManager(lease.Config{TTL: time.Second, OnChange: func(e lease.Event) {
		if e.Removed && e.State == lease.StateExpired {
			expired = append(expired, e)
		}
	}})
	c := claim(hashA, "k1", "c1")
	_, _, err := m.acquire(c, T0.Add(13*time.Second))
	require.NoError(t, err)
	n, err := m.ReconcileAt(ctx, T0.Add(15*time.Second))
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	require.Len(t, expired, 1)
	assert.Equal(t, T0.Add(14*time.Second), expired[0].EndedAt)
	assert.Equal(t, T0.Add(15*time.Second), expired[0].At)
	assert.Equal(t, lease.Reason("TTL_EXPIRED"), expired[0].EndReason)
	l, _, err := m.acquire(c, T0.Add(16*time.Second))
	require.NoError(t, err)
	assert.Equal(t, uint64(2), l.Generation)
}

func TestSnapshotAt(t *testing.T) {
	m := newManager(lease.Config{})
	_, _, err := m.acquire(claim(hashB, "k1", "c2"), T0)
	require.NoError(t, err)
	_, _, err = m.acquire(claim(hashA, "k1", "c1"), T0)
	require.NoError(t, err)
	snap, err := m.SnapshotAt(ctx, T0)
	require.NoError(t, err)
	require.Len(t, snap, 2)
	assert.Equal(t, "c1", snap[0].Connection)
	assert.Equal(t, "c2", snap[1].Connection)
	assert.NotContains(t, fmt.Sprintf("%+v", snap), leasetest.Owner('A'))
}

func TestGenerationExhausted(t *testing.T) {
	s := lease.NewMemoryStore(lease.Config{})
	lease.SetMaxGeneration(s, hashA, lease.MaxGeneration-1)
	m := newManager(lease.Config{Store: s})
	l, _, err := m.acquire(claim(hashA, "k1", "c1"), T0)
	require.NoError(t, err)
	assert.Equal(t, lease.MaxGeneration, l.Generation)
	_, err = m.ReleaseAt(ctx, lease.Holder{Owner: hashA, APIKeyID: "k1", Generation: l.Generation}, "", T0)
	require.NoError(t, err)
	_, _, err = m.acquire(claim(hashA, "k1", "c1"), T0)
	assert.ErrorIs(t, err, lease.ErrServiceUnavailable)
	assert.EqualError(t, err, "lease: LEASE_SERVICE_UNAVAILABLE: lease generation exhausted")
}

func TestMemoryStoreBounded(t *testing.T) {
	s := lease.NewMemoryStore(lease.Config{MaxOwners: 16, Retention: time.Hour})
	m := newManager(lease.Config{Store: s})
	for i := range 200 {
		owner := lease.HashOwner(fmt.Sprint("owner", i))
		at := T0.Add(time.Duration(i) * time.Second)
		l, _, err := m.acquire(claim(owner, "k1", "c1"), at)
		require.NoError(t, err)
		_, err = m.ReleaseAt(ctx, lease.Holder{Owner: owner, APIKeyID: "k1", Generation: l.Generation}, "", at)
		require.NoError(t, err)
		require.LessOrEqual(t, lease.StoreLen(s), 16)
	}
	// Retention: everything ended more than an hour ago is forgotten.
	_, err := m.ReconcileAt(ctx, T0.Add(2*time.Hour))
	require.NoError(t, err)
	assert.Equal(t, 0, lease.StoreLen(s))
}

// A forgotten owner never gets a generation it had before, so a stale
// holder of an old generation stays fenced out; owners the store never
// forgot are unaffected.
func TestMemoryStoreForgottenOwnerKeepsRising(t *testing.T) {
	s := lease.NewMemoryStore(lease.Config{MaxOwners: 16, Retention: time.Minute})
	m := newManager(lease.Config{Store: s})
	for want := uint64(1); want <= 3; want++ {
		l, _, err := m.acquire(claim(hashA, "k1", "c1"), T0)
		require.NoError(t, err)
		require.Equal(t, want, l.Generation)
		_, err = m.ReleaseAt(ctx, lease.Holder{Owner: hashA, APIKeyID: "k1", Generation: want}, "", T0)
		require.NoError(t, err)
	}
	// Forgotten after Retention.
	_, err := m.ReconcileAt(ctx, T0.Add(2*time.Minute))
	require.NoError(t, err)
	require.Equal(t, 0, lease.StoreLen(s))
	l, _, err := m.acquire(claim(hashA, "k1", "c1"), T0.Add(2*time.Minute))
	require.NoError(t, err)
	assert.Equal(t, uint64(4), l.Generation)
	for g := uint64(1); g <= 3; g++ {
		assert.ErrorIs(t, m.FenceAt(ctx, lease.Holder{Owner: hashA, APIKeyID: "k1", Generation: g}, "c1", T0.Add(2*time.Minute)), lease.ErrFenceStale)
	}
	_, err = m.ReleaseAt(ctx, lease.Holder{Owner: hashA, APIKeyID: "k1", Generation: 4}, "", T0.Add(2*time.Minute))
	require.NoError(t, err)

	// Forgotten to make room at the cap: 16 other owners come and go, and
	// the least recently ended (A first) are dropped for the last one.
	for i := range 16 {
		o := lease.HashOwner(fmt.Sprint("filler", i))
		at := T0.Add(2*time.Minute + time.Duration(i+1)*time.Second)
		l, _, err := m.acquire(claim(o, "k1", "f"), at)
		require.NoError(t, err)
		want := uint64(4) // above the floor of 3 left by A's first forgetting
		if i == 15 {
			want = 5 // A (generation 4) was dropped to make room
		}
		assert.Equal(t, want, l.Generation, "filler %d", i)
		_, err = m.ReleaseAt(ctx, lease.Holder{Owner: o, APIKeyID: "k1", Generation: l.Generation}, "", at)
		require.NoError(t, err)
		require.LessOrEqual(t, lease.StoreLen(s), 16)
	}
	l, _, err = m.acquire(claim(hashA, "k1", "c1"), T0.Add(2*time.Minute+20*time.Second))
	require.NoError(t, err)
	assert.Equal(t, uint64(5), l.Generation)

	// A store that never forgot anyone starts every owner at 1.
	fresh := newManager(lease.Config{})
	l, _, err = fresh.acquire(claim(hashB, "k1", "c1"), T0)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), l.Generation)
}

func TestMemoryStoreFullOfActiveOwners(t *testing.T) {
	s := lease.NewMemoryStore(lease.Config{MaxOwners: 16})
	m := newManager(lease.Config{Store: s})
	for i := range 16 {
		_, _, err := m.acquire(claim(lease.HashOwner(fmt.Sprint("owner", i)), "k1", fmt.Sprint("c", i)), T0)
		require.NoError(t, err)
	}
	_, _, err := m.acquire(claim(hashA, "k1", "c99"), T0)
	assert.ErrorIs(t, err, lease.ErrServiceUnavailable)
	assert.EqualError(t, err, "lease: LEASE_SERVICE_UNAVAILABLE: lease store full")
	// Once they expire there is room again.
	_, _, err = m.acquire(claim(hashA, "k1", "c99"), T0.Add(121*time.Second))
	assert.NoError(t, err)
}

func TestMemoryStoreLazySweep(t *testing.T) {
	s := lease.NewMemoryStore(lease.Config{Retention: time.Minute})
	m := newManager(lease.Config{Store: s, TTL: time.Second})
	for i := range 10 {
		c := claim(lease.HashOwner(fmt.Sprint("owner", i)), "k1", fmt.Sprint("c", i))
		_, _, err := m.acquire(c, T0)
		require.NoError(t, err)
	}
	assert.Equal(t, 10, lease.StoreLen(s))
	// A write well after expiry plus retention sweeps the expired owners.
	_, _, err := m.acquire(claim(hashA, "k1", "cx"), T0.Add(10*time.Minute))
	require.NoError(t, err)
	assert.Equal(t, 1, lease.StoreLen(s))
}

// Hammer: 100 goroutines, 100 owners, 10 connections: exactly 10 winners,
// never two active leases on one connection, even while winners renew and
// fence concurrently.
func TestHammerUniqueness(t *testing.T) {
	m := newManager(lease.Config{})
	var conns []string
	for i := range 10 {
		conns = append(conns, fmt.Sprint("c", i))
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners = map[string]lease.OwnerHash{}
		waiting int
	)
	start := make(chan struct{})
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := lease.HashOwner(fmt.Sprint("hammer", i))
			<-start
			l, _, err := m.acquire(claim(owner, "k1", conns...), T0)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				if _, dup := winners[l.Connection]; dup {
					t.Errorf("connection %s won twice", l.Connection)
				}
				winners[l.Connection] = owner
			case codeOf(err) == lease.CodeCapacityUnavailable:
				waiting++
			default:
				t.Errorf("owner %d: %v", i, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	assert.Len(t, winners, 10)
	assert.Equal(t, 90, waiting)
	for conn, owner := range winners {
		assert.NoError(t, m.FenceAt(ctx, lease.Holder{Owner: owner, APIKeyID: "k1", Generation: 1}, conn, T0))
	}
}

func codeOf(err error) string {
	if le, ok := err.(*lease.Error); ok {
		return le.Code
	}
	return ""
}

// fenceRequest is the per-request lease work of a router: read the
// headers of a request made with API key apiKeyID, then fence them.
func fenceRequest(m *manager, h http.Header, apiKeyID, connection string, now time.Time) (lease.Holder, error) {
	owner, gen, err := lease.ParseHeader(h)
	if err != nil {
		return lease.Holder{}, err
	}
	hd := lease.Holder{Owner: owner, APIKeyID: apiKeyID, Generation: gen}
	return hd, m.FenceAt(ctx, hd, connection, now)
}

func TestParseHeaderThenFenceAt(t *testing.T) {
	m := newManager(lease.Config{})
	tok := leasetest.Owner('A')
	_, _, err := m.acquire(claim(lease.HashOwner(tok), "k1", "c1"), T0)
	require.NoError(t, err)
	at := T0.Add(time.Second)
	cases := []struct {
		name   string
		h      http.Header
		key    string
		conn   string
		want   error
		status int
		code   string
	}{
		{"valid", header("X-OmniRoute-Lease-Owner", tok, "X-OmniRoute-Lease-Generation", "1"), "k1", "c1", nil, 0, ""},
		{"missing owner", header(), "k1", "c1", lease.ErrContextRequired, 400, "LEASE_CONTEXT_REQUIRED"},
		{"owner without generation", header("X-OmniRoute-Lease-Owner", tok), "k1", "c1", lease.ErrContextInvalid, 400, "LEASE_CONTEXT_INVALID"},
		{"malformed owner", header("X-OmniRoute-Lease-Owner", "vlo_short", "X-OmniRoute-Lease-Generation", "1"), "k1", "c1", lease.ErrContextInvalid, 400, "LEASE_CONTEXT_INVALID"},
		{"generation zero", header("X-OmniRoute-Lease-Owner", tok, "X-OmniRoute-Lease-Generation", "0"), "k1", "c1", lease.ErrContextInvalid, 400, "LEASE_CONTEXT_INVALID"},
		{"generation+1", header("X-OmniRoute-Lease-Owner", tok, "X-OmniRoute-Lease-Generation", "2"), "k1", "c1", lease.ErrFenceStale, 409, "LEASE_FENCE_STALE"},
		{"other managed key", header("X-OmniRoute-Lease-Owner", tok, "X-OmniRoute-Lease-Generation", "1"), "k2", "c1", lease.ErrFenceStale, 409, "LEASE_FENCE_STALE"},
		{"other connection", header("X-OmniRoute-Lease-Owner", tok, "X-OmniRoute-Lease-Generation", "1"), "k1", "c2", lease.ErrConnectionMismatch, 409, "LEASE_CONNECTION_MISMATCH"},
		{"no lease", header("X-OmniRoute-Lease-Owner", leasetest.Owner('B'), "X-OmniRoute-Lease-Generation", "1"), "k1", "c1", lease.ErrRequired, 409, "LEASE_REQUIRED"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hd, err := fenceRequest(m, c.h, c.key, c.conn, at)
			if c.want == nil {
				require.NoError(t, err)
				assert.Equal(t, lease.Holder{Owner: lease.HashOwner(tok), APIKeyID: "k1", Generation: 1}, hd)
				return
			}
			assert.ErrorIs(t, err, c.want)
			var le *lease.Error
			require.ErrorAs(t, err, &le)
			assert.Equal(t, c.status, le.Status)
			assert.Equal(t, c.code, le.Code)
		})
	}
	h := header("X-OmniRoute-Lease-Owner", tok, "X-OmniRoute-Lease-Generation", "1")
	assert.Zero(t, testing.AllocsPerRun(1000, func() {
		if _, err := fenceRequest(m, h, "k1", "c1", at); err != nil {
			t.Fatal(err)
		}
	}))
}

// Unmanaged traffic skips only connections held by a live lease.
func TestHeldAt(t *testing.T) {
	m := newManager(lease.Config{})
	_, held, err := m.HeldAt(ctx, "c1", T0)
	require.NoError(t, err)
	assert.False(t, held)
	_, _, err = m.acquire(claim(hashA, "k1", "c1"), T0)
	require.NoError(t, err)
	until, held, err := m.HeldAt(ctx, "c1", T0.Add(time.Second))
	require.NoError(t, err)
	assert.True(t, held)
	assert.Equal(t, T0.Add(120*time.Second), until)
	_, held, _ = m.HeldAt(ctx, "c2", T0)
	assert.False(t, held)
	_, held, _ = m.HeldAt(ctx, "c1", T0.Add(120*time.Second))
	assert.False(t, held, "expired lease no longer holds the connection")
	assert.Zero(t, testing.AllocsPerRun(1000, func() {
		if _, ok, _ := m.HeldAt(ctx, "c1", T0); !ok {
			t.Fatal("not held")
		}
	}))

	l, _, err := m.acquire(claim(hashA, "k1", "c1"), T0.Add(121*time.Second))
	require.NoError(t, err)
	_, held, _ = m.HeldAt(ctx, "c1", T0.Add(122*time.Second))
	assert.True(t, held, "a new lease holds the connection again")
	h := lease.Holder{Owner: hashA, APIKeyID: "k1", Generation: l.Generation}
	_, err = m.ReleaseAt(ctx, h, "", T0.Add(123*time.Second))
	require.NoError(t, err)
	_, held, _ = m.HeldAt(ctx, "c1", T0.Add(123*time.Second))
	assert.False(t, held, "a released lease no longer holds the connection")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, held, err = m.HeldAt(cancelled, "c1", T0)
	assert.ErrorIs(t, err, context.Canceled)
	assert.False(t, held)
}

// Owners acquire, renew, fence, select and release concurrently over a few
// connections while the clock moves; at every snapshot no connection or
// owner holds two leases.
func TestConcurrentLifecycle(t *testing.T) {
	m := newManager(lease.Config{TTL: 2 * time.Second})
	conns := []string{"c0", "c1", "c2", "c3"}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := lease.HashOwner(fmt.Sprint("mix", i))
			key := fmt.Sprint("k", i%2)
			for step := range 200 {
				now := T0.Add(time.Duration(step) * 100 * time.Millisecond)
				l, _, err := m.acquire(claim(owner, key, conns...), now)
				if err != nil {
					continue
				}
				h := lease.Holder{Owner: owner, APIKeyID: key, Generation: l.Generation}
				_ = m.FenceAt(ctx, h, l.Connection, now)
				_, _ = m.SelectAt(ctx, h, "openai", conns[i%4:], now)
				_, _ = m.RenewAt(ctx, h, now)
				if step%3 == 0 {
					_, _ = m.ReleaseAt(ctx, h, "", now)
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for step := range 200 {
			now := T0.Add(time.Duration(step) * 100 * time.Millisecond)
			snap, err := m.SnapshotAt(ctx, now)
			if err != nil {
				t.Error(err)
				return
			}
			owners := map[lease.OwnerHash]bool{}
			seen := map[string]bool{}
			for _, l := range snap {
				if owners[l.Owner] || seen[l.Connection] {
					t.Errorf("duplicate active lease %+v", l)
				}
				owners[l.Owner], seen[l.Connection] = true, true
			}
			_, _ = m.ReconcileAt(ctx, now)
		}
	}()
	wg.Wait()
}
