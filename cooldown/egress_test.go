package cooldown

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// egressFixture registers opencode-go rows C, S1, S2 and an openai row O, all
// seen on 1.2.3.4 an hour before t0.
func egressFixture(cfg Config) *Tracker {
	tr := New(cfg)
	seen := t0.Add(-time.Hour)
	for _, c := range []string{"C", "S1", "S2"} {
		tr.RegisterAt(c, Options{Provider: "opencode-go"}, t0)
		tr.SeenEgressAt(c, "1.2.3.4", seen)
	}
	tr.RegisterAt("O", Options{Provider: "openai"}, t0)
	tr.SeenEgressAt("O", "1.2.3.4", seen)
	return tr
}

// egressAppliesTo reports whether the failure f of conn triggers the
// egress-IP family lockout: a 429 with reason "rate_limit_exceeded" or
// "quota_exhausted", neither permanent nor credits exhausted, on a connection
// of the family whose cooling is not disabled.
func egressAppliesTo(tr *Tracker, conn string, f Failure) bool {
	e, _ := tr.store.Load(conn)
	return !e.Options.DisableCooling && terminalOf(&e, f) == Available && tr.egressApplies(e.Options.Provider, f)
}

var egressLimit = Failure{Status: 429, Reason: "rate_limit_exceeded", Message: "rate limit reached", Cooldown: 3 * time.Second}

// M6.3 scenarios 1 and 3.
func TestEgressFamilyLock(t *testing.T) {
	var events []Event
	tr := egressFixture(Config{OnChange: func(e Event) { events = append(events, e) }})
	assert.True(t, egressAppliesTo(tr, "C", egressLimit))
	r := tr.FailAt("C", egressLimit, t0)
	assert.Equal(t, Episode, r.Action)
	assert.Equal(t, 3*time.Second, r.Cooldown)
	assert.Equal(t, []string{"S1", "S2"}, r.Egress)
	want := Status{State: Cooling, Until: t0.Add(3 * time.Second), Reason: "rate_limit_exceeded"}
	for _, c := range []string{"C", "S1", "S2"} {
		assert.Equal(t, want, tr.StatusAt(c, t0), c)
	}
	assert.True(t, tr.StatusAt("O", t0).State == Available, "another provider on the same IP is not cooled")
	for _, i := range tr.SnapshotAt(t0) {
		if i.Conn != "O" {
			assert.Equal(t, 429, i.ErrorStatus, i.Conn)
			assert.Equal(t, "Shared egress IP quota exhausted (opencode-go)", i.LastError, i.Conn)
		}
	}
	require.Len(t, events, 3)
	assert.Equal(t, Event{Conn: "C", Provider: "opencode-go", At: t0, Action: Episode, State: Cooling, Until: want.Until,
		Reason: want.Reason, From: Available}, events[0])
	assert.Equal(t, Event{Conn: "S1", Provider: "opencode-go", At: t0, Action: Episode, State: Cooling, Until: want.Until,
		Reason: want.Reason, From: Available, Source: "C"}, events[1])
	assert.Equal(t, "C", events[2].Source)
}

// The family cooldown defaults to 2 min when the failure yields none.
func TestEgressDefaultCooldown(t *testing.T) {
	tr := egressFixture(Config{})
	r := tr.FailAt("C", Failure{Status: 429, Reason: "quota_exhausted"}, t0)
	assert.Equal(t, Episode, r.Action)
	assert.Equal(t, 2*time.Minute, r.Cooldown)
	assert.Equal(t, t0.Add(2*time.Minute), tr.StatusAt("S2", t0).Until)
}

// M6.3 scenario 2: without a recent egress IP only C is cooled.
func TestEgressUnknownIP(t *testing.T) {
	tr := egressFixture(Config{})
	later := t0.Add(24 * time.Hour) // all sightings are now 25 h old
	r := tr.FailAt("C", egressLimit, later)
	assert.Equal(t, Episode, r.Action)
	assert.Empty(t, r.Egress)
	assert.True(t, tr.StatusAt("S1", later).State == Available)

	// A sibling seen more than 24 h ago is not cooled either.
	tr = egressFixture(Config{})
	tr.SeenEgressAt("C", "1.2.3.4", t0.Add(23*time.Hour))
	r = tr.FailAt("C", egressLimit, t0.Add(23*time.Hour+30*time.Minute))
	assert.Empty(t, r.Egress)
}

// M6.3 scenario 4: 401 and 403 never touch a sibling.
func TestEgressAuthFailures(t *testing.T) {
	tr := egressFixture(Config{})
	r := tr.FailAt("C", Failure{Status: 401, Reason: "auth_error"}, t0)
	assert.Equal(t, Expired, r.Status.State)
	assert.Empty(t, r.Egress)

	tr = egressFixture(Config{})
	f := Failure{Status: 403, Reason: "request_rejected", Message: "request rejected"}
	assert.False(t, egressAppliesTo(tr, "C", f))
	r = tr.FailAt("C", f, t0)
	assert.Equal(t, Recorded, r.Action)
	assert.True(t, tr.StatusAt("C", t0).State == Available)
	assert.True(t, tr.StatusAt("S1", t0).State == Available)

	for _, f := range []Failure{
		{Status: 429, Reason: "rate_limit_exceeded", Permanent: true},
		{Status: 429, Reason: "quota_exhausted", CreditsExhausted: true},
		{Status: 429, Reason: "server_error", Backoff: true},
		{Status: 503, Reason: "rate_limit_exceeded", Backoff: true},
	} {
		assert.False(t, egressAppliesTo(egressFixture(Config{}), "C", f), "%+v", f)
	}
}

// M6.3 scenario 5: the lockout can be turned off.
func TestEgressDisabled(t *testing.T) {
	tr := egressFixture(Config{DisableEgressLock: true})
	r := tr.FailAt("C", egressLimit, t0)
	assert.Empty(t, r.Egress)
	assert.True(t, tr.StatusAt("S1", t0).State == Available)
}

// M6.3 scenario 6: disableCooling on C skips the branch.
func TestEgressDisableCooling(t *testing.T) {
	tr := egressFixture(Config{})
	tr.RegisterAt("C", Options{Provider: "opencode-go", DisableCooling: true}, t0)
	assert.False(t, egressAppliesTo(tr, "C", egressLimit))
	r := tr.FailAt("C", egressLimit, t0)
	assert.Equal(t, Recorded, r.Action)
	assert.Empty(t, r.Egress)
	assert.True(t, tr.StatusAt("S1", t0).State == Available)
}

// Siblings: a longer cooldown is never shortened, a shorter one is extended,
// a terminal sibling is never touched, and no terminal state is set.
func TestEgressSiblings(t *testing.T) {
	tr := egressFixture(Config{})
	tr.RegisterAt("S3", Options{Provider: "opencode-cli"}, t0)
	tr.SeenEgressAt("S3", "1.2.3.4", t0)
	tr.RegisterAt("S4", Options{Provider: "opencode-go"}, t0)
	tr.SeenEgressAt("S4", "5.6.7.8", t0)

	tr.FailAt("S1", Failure{Status: 503, Reason: "server_error", Cooldown: time.Hour}, t0)
	tr.SeenEgressAt("S1", "9.9.9.9", t0) // moved away
	tr.SeenEgressAt("S1", "1.2.3.4", t0.Add(time.Second))
	tr.FailAt("S2", Failure{Status: 403, Permanent: true, Reason: "auth_error"}, t0)
	tr.FailAt("S3", Failure{Status: 503, Reason: "server_error", Cooldown: time.Second}, t0)

	r := tr.FailAt("C", egressLimit, t0.Add(time.Second))
	assert.Equal(t, []string{"S3"}, r.Egress)
	assert.Equal(t, t0.Add(time.Hour), tr.StatusAt("S1", t0).Until, "never shortened")
	assert.Equal(t, Banned, tr.StatusAt("S2", t0).State, "terminal untouched")
	assert.Equal(t, t0.Add(4*time.Second), tr.StatusAt("S3", t0.Add(time.Second)).Until, "extended")
	assert.True(t, tr.StatusAt("S4", t0).State == Available, "another IP")

	// A sibling whose cooling is disabled is never cooled.
	tr = egressFixture(Config{})
	tr.RegisterAt("S1", Options{Provider: "opencode-go", DisableCooling: true}, t0)
	r = tr.FailAt("C", egressLimit, t0)
	assert.Equal(t, []string{"S2"}, r.Egress)
	assert.True(t, tr.StatusAt("S1", t0).State == Available)

	// A cooling C absorbs further failures that end no later: no second
	// round. (A later end extends the family: TestEgressExtension.)
	shorter := egressLimit
	shorter.Cooldown = time.Second
	r = tr.FailAt("C", shorter, t0.Add(2*time.Second))
	assert.Equal(t, Absorbed, r.Action)
	assert.Empty(t, r.Egress)
	r = tr.FailAt("C", Failure{Status: 429, Reason: "rate_limit_exceeded", Backoff: true}, t0.Add(2*time.Second))
	assert.Equal(t, Absorbed, r.Action)
	assert.Empty(t, r.Egress)
}

func TestSeenEgressRefresh(t *testing.T) {
	tr := New(Config{})
	tr.SeenEgressAt("k1", "", t0)
	assert.Empty(t, tr.SnapshotAt(t0))
	tr.SeenEgressAt("k1", "1.2.3.4", t0)
	tr.SeenEgressAt("k1", "1.2.3.4", t0.Add(30*time.Second))
	e, _ := tr.store.Load("k1")
	assert.Equal(t, t0, e.EgressSeen, "refreshed at most once a minute")
	tr.SeenEgressAt("k1", "1.2.3.4", t0.Add(2*time.Minute))
	e, _ = tr.store.Load("k1")
	assert.Equal(t, t0.Add(2*time.Minute), e.EgressSeen)
	tr.SeenEgressAt("k1", "4.3.2.1", t0.Add(2*time.Minute))
	e, _ = tr.store.Load("k1")
	assert.Equal(t, "4.3.2.1", e.EgressIP)
}
