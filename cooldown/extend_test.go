package cooldown

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard"
)

// D13: while a connection cools, a failure never shortens the cooldown and
// never raises the level, but an explicit cooldown (retry hint or fixed
// cooldown) that ends later extends the episode to that end, capped by
// MaxHint.
func TestLaterLongerHintExtendsCooldown(t *testing.T) {
	var events []Event
	tr := New(Config{OnChange: func(e Event) { events = append(events, e) }})
	cooling := func(until time.Duration, reason string) Status {
		return Status{State: Cooling, Until: t0.Add(until), Reason: reason, Level: 1}
	}
	r := tr.FailAt("k1", rateLimit, t0)
	require.Equal(t, Episode, r.Action)
	require.Equal(t, cooling(3*time.Second, "rate_limit_exceeded"), r.Status)

	steps := []struct {
		name   string
		at     time.Duration
		f      Failure
		action Action
		left   time.Duration // Result.Cooldown
		hinted bool
		status Status
	}{
		{"longer retry hint extends", time.Second, Failure{Status: 429, Reason: "quota_exhausted", RetryAfter: 10 * time.Second},
			Extended, 10 * time.Second, true, cooling(11*time.Second, "quota_exhausted")},
		{"shorter retry hint changes nothing", 2 * time.Second, Failure{Status: 429, Reason: "rate_limit_exceeded", RetryAfter: 5 * time.Second},
			Absorbed, 9 * time.Second, false, cooling(11*time.Second, "quota_exhausted")},
		{"hint ending at the same instant changes nothing", 2 * time.Second, Failure{Status: 429, Reason: "rate_limit_exceeded", RetryAfter: 9 * time.Second},
			Absorbed, 9 * time.Second, false, cooling(11*time.Second, "quota_exhausted")},
		{"backoff failure changes nothing", 2 * time.Second, rateLimit,
			Absorbed, 9 * time.Second, false, cooling(11*time.Second, "quota_exhausted")},
		{"base failure changes nothing", 2 * time.Second, Failure{Status: 409, Reason: "unknown", Base: true},
			Absorbed, 9 * time.Second, false, cooling(11*time.Second, "quota_exhausted")},
		{"refusal streak never extends", 2 * time.Second, Failure{Status: 403, Reason: "rate_limit_exceeded", RequestRejected: true, Cooldown: time.Hour},
			Absorbed, 9 * time.Second, false, cooling(11*time.Second, "quota_exhausted")},
		{"longer fixed cooldown (a reset time) extends", 3 * time.Second, Failure{Status: 429, Reason: "quota_exhausted", Cooldown: time.Hour},
			Extended, time.Hour, false, cooling(3*time.Second+time.Hour, "quota_exhausted")},
		{"hint capped by MaxHint", 4 * time.Second, Failure{Status: 429, Reason: "quota_exhausted", RetryAfter: 60 * 24 * time.Hour},
			Extended, 30 * 24 * time.Hour, true, cooling(4*time.Second+30*24*time.Hour, "quota_exhausted")},
	}
	for _, s := range steps {
		n := len(events)
		from := tr.StatusAt("k1", t0.Add(s.at))
		r := tr.FailAt("k1", s.f, t0.Add(s.at))
		assert.Equal(t, s.action, r.Action, s.name)
		assert.Equal(t, s.left, r.Cooldown, s.name)
		assert.Equal(t, s.hinted, r.Hinted, s.name)
		assert.Equal(t, s.status, r.Status, s.name)
		assert.Equal(t, s.status, tr.StatusAt("k1", t0.Add(s.at)), s.name)
		if s.action == Extended {
			require.Len(t, events, n+1, s.name)
			require.Equal(t, Cooling, from.State, s.name)
			assert.Equal(t, Event{Conn: "k1", At: t0.Add(s.at), Action: Extended, State: Cooling, Until: s.status.Until,
				Reason: s.status.Reason, Level: 1, From: Cooling}, events[n], s.name)
		} else {
			assert.Len(t, events, n, "%s: no event", s.name)
		}
	}
	info := tr.SnapshotAt(t0.Add(5 * time.Second))[0]
	assert.Equal(t, 429, info.ErrorStatus, "the extending failure is recorded")

	// Terminal beats transient, extension or not.
	r = tr.FailAt("k1", Failure{Status: 402, Reason: "quota_exhausted", RetryAfter: time.Hour}, t0.Add(5*time.Second))
	assert.Equal(t, Terminated, r.Action)
	assert.Equal(t, CreditsExhausted, r.Status.State)
	r = tr.FailAt("k1", Failure{Status: 429, Reason: "quota_exhausted", RetryAfter: 90 * 24 * time.Hour}, t0.Add(6*time.Second))
	assert.Equal(t, Absorbed, r.Action)
	assert.Equal(t, CreditsExhausted, r.Status.State)

	// The success after the episode resets the level to 0 as usual.
	tr.ResetAt(Selector{IDs: []string{"k1"}}, t0.Add(7*time.Second))
	assert.Equal(t, Status{}, tr.StatusAt("k1", t0.Add(7*time.Second)))
}

// A retry hint extends only where the profile honours hints; a fixed
// cooldown extends in every class.
func TestExtensionFollowsHintPolicy(t *testing.T) {
	tr := New(Config{MaxHint: time.Hour})
	tr.RegisterAt("o1", Options{Class: routeguard.OAuth}, t0)
	tr.FailAt("o1", rateLimit, t0) // 5 s
	r := tr.FailAt("o1", Failure{Status: 429, Reason: "rate_limit_exceeded", RetryAfter: time.Minute}, t0.Add(time.Second))
	assert.Equal(t, Absorbed, r.Action, "oauth ignores hints")
	assert.Equal(t, t0.Add(5*time.Second), tr.StatusAt("o1", t0.Add(time.Second)).Until)
	r = tr.FailAt("o1", Failure{Status: 429, Reason: "quota_exhausted", Cooldown: 2 * time.Hour}, t0.Add(time.Second))
	assert.Equal(t, Extended, r.Action)
	assert.Equal(t, time.Hour, r.Cooldown, "capped by MaxHint")
	assert.Equal(t, Status{State: Cooling, Until: t0.Add(time.Second + time.Hour), Reason: "quota_exhausted", Level: 1},
		tr.StatusAt("o1", t0.Add(time.Second)))

	// Cooling disabled: the connection never cools, so nothing extends.
	tr.RegisterAt("k2", Options{DisableCooling: true}, t0)
	r = tr.FailAt("k2", Failure{Status: 429, Reason: "rate_limit_exceeded", RetryAfter: time.Minute}, t0)
	assert.Equal(t, Recorded, r.Action)
	assert.True(t, tr.StatusAt("k2", t0).State == Available)
}

// D13 on the egress-IP family: an extension of the failing connection
// extends the siblings it cooled, never shortening any.
func TestEgressExtension(t *testing.T) {
	tr := egressFixture(Config{})
	r := tr.FailAt("C", egressLimit, t0)
	require.Equal(t, []string{"S1", "S2"}, r.Egress)
	// S2's own answer says one hour: that extends S2 alone.
	assert.Equal(t, Extended, tr.FailAt("S2", Failure{Status: 503, Reason: "server_error", Cooldown: time.Hour}, t0).Action)
	longer := egressLimit
	longer.Cooldown = 10 * time.Second
	r = tr.FailAt("C", longer, t0.Add(time.Second))
	assert.Equal(t, Extended, r.Action)
	assert.Equal(t, 10*time.Second, r.Cooldown)
	assert.Equal(t, []string{"S1"}, r.Egress)
	assert.Equal(t, t0.Add(11*time.Second), tr.StatusAt("C", t0.Add(time.Second)).Until)
	assert.Equal(t, t0.Add(11*time.Second), tr.StatusAt("S1", t0.Add(time.Second)).Until)
	assert.Equal(t, t0.Add(time.Hour), tr.StatusAt("S2", t0.Add(time.Second)).Until, "never shortened")
	assert.True(t, tr.StatusAt("O", t0.Add(time.Second)).State == Available)
}

func TestActionNames(t *testing.T) {
	assert.Equal(t, "extended", Extended.String())
	assert.Equal(t, "unknown", Action(99).String())
}
