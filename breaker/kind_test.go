package breaker

import (
	"encoding/json"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func withHints(p Profile) Profile {
	p.Hints = true
	return p.normalize()
}

// Spec M1.3 #16, the table: with hints on, a quota_exhausted failure makes
// the base open time 1 h, which escalates like Reset and is capped at
// 1 h·MaxMultiplier.
func TestScenarioKindOpenDurations(t *testing.T) {
	h := time.Hour
	cases := []struct {
		name string
		p    Profile
		k    Kind
		want []time.Duration // by cycles 0, 1, 2, …
	}{
		{"oauth quota", withHints(oauth), KindQuotaExhausted, []time.Duration{h, h, h, 2 * h, 4 * h, 8 * h, 8 * h}},
		{"oauth quota, hints off", oauth, KindQuotaExhausted, []time.Duration{60e9, 60e9, 60e9, 120e9, 240e9, 480e9, 480e9}},
		{"oauth rate limit", withHints(oauth), KindRateLimit, []time.Duration{60e9, 60e9, 60e9, 120e9, 240e9, 480e9, 480e9}},
		{"oauth transient keeps Reset", withHints(oauth), KindTransient, []time.Duration{60e9, 60e9, 60e9, 120e9}},
		{"apikey rate limit", withHints(defaultProfile(APIKey)), KindRateLimit, []time.Duration{60e9, 60e9, 60e9, 60e9, 120e9, 240e9, 240e9}},
		{"apikey quota", withHints(defaultProfile(APIKey)), KindQuotaExhausted, []time.Duration{h, h, h, h, 2 * h, 4 * h, 4 * h}},
		{"custom cooldown", func() Profile {
			p := defaultProfile(APIKey)
			p.Kinds[KindTransient].Cooldown = 45 * time.Second
			return withHints(p)
		}(), KindTransient, []time.Duration{45e9, 45e9, 45e9, 45e9, 90e9, 180e9, 180e9}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for cycles, w := range tc.want {
				assert.Equal(t, w, tc.p.openDurationFor(tc.k, cycles), "cycles %d", cycles)
			}
		})
	}
	assert.Equal(t, 8*h, withHints(oauth).maxOpenDuration())
	assert.Equal(t, 8*time.Minute, oauth.maxOpenDuration())
}

func kindFail(k Kind) Report { return Report{Outcome: Failure, Kind: k} }

// Spec M1.3 #16 on a breaker: the quota failure that opens it gives 1 h;
// failed probes of the same kind escalate from there; a probe failure
// without a kind falls back to Reset.
func TestScenarioKindCooldownOnBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := time.Hour
		b := New("claude", withHints(oauth), nil)
		for range 8 {
			done, err := b.AllowReport()
			require.NoError(t, err)
			done(kindFail(KindQuotaExhausted))
		}
		st := b.Status()
		require.Equal(t, Open, st.State)
		assert.Equal(t, h, st.RetryAfter)
		assert.Equal(t, KindQuotaExhausted, b.Export().LastKind)
		_, err := b.Allow()
		var oe *Error
		require.ErrorAs(t, err, &oe)
		assert.Equal(t, KindQuotaExhausted, oe.Kind)
		assert.Equal(t, h, oe.RetryAfter)
		// The body naming the failure kind is combo/admin's; see
		// TestBreakerOpenBodyFailureKind there.
		time.Sleep(h - time.Millisecond)
		requireState(t, b, Open, time.Millisecond)
		time.Sleep(time.Millisecond)
		for i, want := range []time.Duration{h, h, 2 * h, 4 * h, 8 * h, 8 * h} {
			requireState(t, b, HalfOpen, 0)
			probe, err := b.AllowReport()
			require.NoError(t, err)
			probe(kindFail(KindQuotaExhausted))
			requireState(t, b, Open, want)
			assert.Equal(t, i+1, b.Status().OpenCycles)
			time.Sleep(want)
		}
		requireState(t, b, HalfOpen, 0)
		report(t, b, Failure) // cycle 7, no kind: 60 s·2^5 capped at 480 s
		requireState(t, b, Open, 8*time.Minute)
		time.Sleep(8 * time.Minute)
		report(t, b, Success)
		st = b.Status()
		assert.Equal(t, Closed, st.State)
		assert.Equal(t, 0, st.OpenCycles)
		assert.Equal(t, KindNone, b.Export().LastKind)
	})
}

// A kind's own threshold opens the breaker at once, below OpenAt, without
// counting a cycle.
func TestKindThreshold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := defaultProfile(APIKey) // opens at 12, reset 30 s
		p.Kinds[KindRateLimit].OpenAt = 3
		p = withHints(p)
		b := New("p", p, nil)
		b.Report(kindFail(KindRateLimit))
		b.Report(kindFail(KindTransient))
		b.Report(kindFail(KindRateLimit))
		requireState(t, b, Closed, 0)
		b.Report(kindFail(KindRateLimit))
		st := b.Status()
		assert.Equal(t, Open, st.State)
		assert.Equal(t, 4, st.Failures)
		assert.Equal(t, 0, st.OpenCycles)
		assert.Equal(t, time.Minute, st.RetryAfter, "the rate_limit hint")
		assert.Equal(t, map[Kind]int{KindRateLimit: 3, KindTransient: 1}, b.Export().KindFailures)
	})
}

func TestKindNormalize(t *testing.T) {
	p := defaultProfile(OAuth)
	p.Kinds[KindNone] = KindPolicy{Cooldown: time.Hour, OpenAt: 3}
	p.Kinds[KindTransient] = KindPolicy{Cooldown: time.Second, OpenAt: -4}
	p.Kinds[KindRateLimit] = KindPolicy{Cooldown: -time.Second, OpenAt: 5000}
	p.Kinds[KindQuotaExhausted] = KindPolicy{Cooldown: 100 * time.Hour, OpenAt: 2}
	p.ConnDedup, p.NetworkDedup, p.MaxConns = time.Nanosecond, 2*time.Hour, -1
	n := p.normalize()
	assert.Equal(t, [numKinds]KindPolicy{
		{},
		{Cooldown: time.Minute}, // raised to Reset
		{OpenAt: 1000},
		{Cooldown: 24 * time.Hour, OpenAt: 2},
	}, n.Kinds)
	assert.Equal(t, time.Millisecond, n.ConnDedup)
	assert.Equal(t, time.Hour, n.NetworkDedup)
	assert.Equal(t, 0, n.MaxConns)
	assert.Equal(t, n, n.normalize())
	assert.Equal(t, 1024, n.maxConns())
	assert.Equal(t, 10*time.Second, Profile{}.networkDedup())
	assert.Equal(t, 5*time.Second, Profile{}.connDedup())
}

func TestKindText(t *testing.T) {
	cases := []struct {
		in   string
		want Kind
		ok   bool
	}{
		{"", KindNone, true}, {"null", KindNone, true}, {"none", KindNone, true},
		{"transient", KindTransient, true}, {"rate_limit", KindRateLimit, true},
		{"RATE-LIMIT", KindRateLimit, true}, {" quota_exhausted ", KindQuotaExhausted, true},
		{"quota", KindNone, false}, {"rate_limit_exceeded", KindNone, false},
	}
	for _, tc := range cases {
		k, err := parseKind(tc.in)
		assert.Equal(t, tc.want, k, tc.in)
		if tc.ok {
			assert.NoError(t, err, tc.in)
		} else {
			assert.ErrorIs(t, err, ErrInvalidRecord, tc.in)
		}
	}
	for k := range Kind(numKinds) {
		b, err := k.MarshalText()
		require.NoError(t, err)
		var back Kind
		require.NoError(t, back.UnmarshalText(b))
		assert.Equal(t, k, back)
	}
	_, err := Kind(9).MarshalText()
	assert.ErrorIs(t, err, ErrInvalidRecord)
	assert.Equal(t, "kind(9)", Kind(9).String())
}

// A kind the package does not know is kept as KindNone, so exports stay
// encodable.
func TestUnknownKindReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New("p", withHints(defaultProfile(Local)), nil)
		b.Report(kindFail(Kind(200)))
		assert.Equal(t, KindNone, b.Export().LastKind)
		b.Report(kindFail(Kind(200)))
		requireState(t, b, Open, 15*time.Second)
		time.Sleep(15 * time.Second)
		probe, err := b.AllowReport()
		require.NoError(t, err)
		probe(kindFail(Kind(9)))
		rec := b.Export()
		assert.Equal(t, KindNone, rec.LastKind)
		_, err = json.Marshal(rec)
		assert.NoError(t, err)
	})
}

// Hints set on a class profile of a Config keep the class's other values.
func TestConfigHints(t *testing.T) {
	p := Config{OAuth: Profile{Hints: true}}.Normalize().OAuth
	assert.Equal(t, 8, p.OpenAt)
	assert.Equal(t, time.Hour, p.openDurationFor(KindQuotaExhausted, 0))
	assert.Equal(t, 8*time.Hour, p.openDurationFor(KindQuotaExhausted, 9))
	assert.Equal(t, time.Minute, Config{}.Normalize().OAuth.openDurationFor(KindQuotaExhausted, 0))
}
