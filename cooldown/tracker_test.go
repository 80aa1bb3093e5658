package cooldown

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

// rateLimit is a 429 "Rate limit reached" without headers, as classified.
var rateLimit = Failure{Status: 429, Reason: "rate_limit_exceeded", Message: "Rate limit reached", Backoff: true}

// withLevel returns a tracker where conn has the given backoff level and is
// available at the returned time.
func withLevel(t *testing.T, tr *Tracker, conn string, level int) time.Time {
	t.Helper()
	now := t0
	for range level {
		r := tr.FailAt(conn, rateLimit, now)
		require.Equal(t, Episode, r.Action)
		now = r.Status.Until
	}
	require.Equal(t, level, tr.StatusAt(conn, now).Level)
	return now
}

// M3.3 scenarios 1 and 2: apikey backoff, and D5 escalation across episodes.
func TestBackoffAPIKey(t *testing.T) {
	tests := []struct {
		level     int
		cooldown  time.Duration
		wantLevel int
	}{
		{0, ms(3000), 1},
		{1, ms(6000), 2},
		{2, ms(12000), 3},
		{5, ms(96000), 5},
		{9, ms(96000), 5}, // a stored level above the steps is clamped
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.level), func(t *testing.T) {
			tr := New(Config{})
			var now time.Time
			if tt.level <= 5 {
				now = withLevel(t, tr, "k1", tt.level)
			} else {
				now = t0
				tr.store.Update("k1", func(e *Entry, _ bool) bool { e.Level = tt.level; return true })
			}
			r := tr.FailAt("k1", rateLimit, now)
			assert.Equal(t, Episode, r.Action)
			assert.Equal(t, tt.cooldown, r.Cooldown)
			assert.False(t, r.Hinted)
			assert.Equal(t, Status{State: Cooling, Until: now.Add(tt.cooldown), Reason: "rate_limit_exceeded", Level: tt.wantLevel}, r.Status)
		})
	}
}

// M3.3 scenario 3: oauth 503 at level 0 and 8.
func TestBackoffOAuth(t *testing.T) {
	f := Failure{Status: 503, Reason: "server_error", Backoff: true}
	for _, tt := range []struct {
		level, want int
		cooldown    time.Duration
	}{{0, 1, ms(5000)}, {8, 8, ms(1280000)}} {
		tr := New(Config{})
		tr.RegisterAt("o1", Options{Class: routeguard.OAuth}, t0)
		now := t0
		for range tt.level {
			now = tr.FailAt("o1", f, now).Status.Until
		}
		r := tr.FailAt("o1", f, now)
		assert.Equal(t, tt.cooldown, r.Cooldown, "level %d", tt.level)
		assert.Equal(t, tt.want, r.Status.Level, "level %d", tt.level)
	}
	p := Config{}.Normalize()
	assert.Equal(t, ms(1280000), backoff(p.OAuth, 9), "level beyond the steps")
	p.OAuth.Steps = new(10)
	assert.Equal(t, 30*time.Minute, backoff(p.OAuth, 10), "capped by the maximum")
}

// M3.3 scenarios 4–6: hints decide the cooldown when the class honours them,
// and leave the level unchanged (D5).
func TestRetryHints(t *testing.T) {
	hinted := rateLimit
	hinted.RetryAfter = 17 * time.Second

	tr := New(Config{})
	now := withLevel(t, tr, "k1", 2)
	r := tr.FailAt("k1", hinted, now)
	assert.Equal(t, Episode, r.Action)
	assert.Equal(t, ms(17000), r.Cooldown)
	assert.True(t, r.Hinted)
	assert.Equal(t, 2, r.Status.Level)

	tr.RegisterAt("o1", Options{Class: routeguard.OAuth}, t0)
	r = tr.FailAt("o1", hinted, t0)
	assert.Equal(t, ms(5000), r.Cooldown, "oauth ignores hints")
	assert.False(t, r.Hinted)
	assert.Equal(t, 1, r.Status.Level)

	// Scenario 5 (x-ratelimit-reset 10 s away, or "30" relative per D4) and
	// scenario 6 (RetryInfo 26.5 s): the parsed hint becomes the cooldown.
	for _, d := range []time.Duration{ms(10000), ms(30000), ms(26500)} {
		f := rateLimit
		f.RetryAfter = d
		tr := New(Config{})
		assert.Equal(t, d, tr.FailAt("k1", f, t0).Cooldown)
	}

	// A hint is bounded by MaxHint, not by the profile maximum (D3).
	f := rateLimit
	f.RetryAfter = 999999999 * time.Second
	tr = New(Config{})
	assert.Equal(t, 30*24*time.Hour, tr.FailAt("k1", f, t0).Cooldown)
	f.RetryAfter = 2 * time.Hour
	assert.Equal(t, 2*time.Hour, New(Config{}).FailAt("k1", f, t0).Cooldown)
	tr = New(Config{APIKey: Profile{Hints: new(false)}})
	assert.Equal(t, ms(3000), tr.FailAt("k1", f, t0).Cooldown)
}

// M3.3 scenarios 12, 13 and 15: fixed cooldowns from the classification.
func TestFixedCooldowns(t *testing.T) {
	tests := []struct {
		name string
		f    Failure
		want time.Duration
	}{
		{"daily quota at 23:00", Failure{Status: 429, Reason: "quota_exhausted", Cooldown: ms(3600000)}, ms(3600000)},
		{"retired model", Failure{Status: 404, Reason: "not_found", Cooldown: ms(86400000)}, ms(86400000)},
		{"usage limit", Failure{Status: 429, Reason: "quota_exhausted", Cooldown: ms(3600000)}, ms(3600000)},
		{"weekly resets in 3 days", Failure{Status: 429, Reason: "quota_exhausted", Cooldown: ms(259200000)}, ms(259200000)},
		{"session limit", Failure{Status: 429, Reason: "quota_exhausted", Cooldown: ms(18000000)}, ms(18000000)},
		{"fixed beats backoff", Failure{Status: 429, Reason: "rate_limit_exceeded", Cooldown: ms(5000), Backoff: true}, ms(5000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := New(Config{})
			tr.RegisterAt("o1", Options{Class: routeguard.OAuth}, t0)
			r := tr.FailAt("o1", tt.f, t0)
			assert.Equal(t, Episode, r.Action)
			assert.Equal(t, tt.want, r.Cooldown)
			assert.Equal(t, Status{State: Cooling, Until: t0.Add(tt.want), Reason: tt.f.Reason}, r.Status)
		})
	}
}

// Anything else (409, 422, …) gets the profile's base cooldown, without
// escalation.
func TestBaseCooldown(t *testing.T) {
	tr := New(Config{})
	tr.RegisterAt("o1", Options{Class: routeguard.OAuth}, t0)
	now := withLevel(t, tr, "k1", 2)
	f := Failure{Status: 409, Reason: "unknown", Base: true}
	r := tr.FailAt("k1", f, now)
	assert.Equal(t, Episode, r.Action)
	assert.Equal(t, 3*time.Second, r.Cooldown)
	assert.Equal(t, 2, r.Status.Level)
	assert.Equal(t, 5*time.Second, tr.FailAt("o1", f, t0).Cooldown)
}

// M3.3 scenario 14: failures without a cooldown are only recorded.
func TestRecordedWithoutCooldown(t *testing.T) {
	tr := New(Config{})
	r := tr.FailAt("k1", Failure{Status: 400, Reason: "model_capacity", Message: "maximum context length exceeded"}, t0)
	assert.Equal(t, Recorded, r.Action)
	assert.Equal(t, Status{}, r.Status)
	info := tr.SnapshotAt(t0)
	require.Len(t, info, 0, "an unregistered connection at level 0 keeps nothing")

	tr.RegisterAt("k1", Options{Provider: "openai"}, t0)
	tr.FailAt("k1", Failure{Status: 400, Reason: "model_capacity", Message: "maximum context length exceeded"}, t0)
	info = tr.SnapshotAt(t0)
	require.Len(t, info, 1)
	assert.Equal(t, Info{Conn: "k1", Provider: "openai", LastError: "maximum context length exceeded", Reason: "model_capacity", ErrorStatus: 400, LastErrorAt: t0}, info[0])

	r = tr.FailAt("k1", Failure{Status: 400, Reason: "rate_limit_exceeded", Message: "Detected high-frequency non-compliant requests", Backoff: true}, t0)
	assert.Equal(t, ms(3000), r.Cooldown)
}

// M3.3 scenario 7: a ban.
func TestBan(t *testing.T) {
	var events []Event
	tr := New(Config{OnChange: func(e Event) { events = append(events, e) }})
	r := tr.FailAt("k1", Failure{Status: 401, Reason: "auth_error", Message: "account_deactivated", Cooldown: ms(31536000000), Permanent: true}, t0)
	assert.Equal(t, Terminated, r.Action)
	assert.Equal(t, Status{State: Banned, Reason: "auth_error"}, r.Status)
	assert.Equal(t, Status{State: Banned, Reason: "auth_error"}, tr.StatusAt("k1", t0.Add(400*24*time.Hour)))
	require.Len(t, events, 1)
	assert.Equal(t, Event{Conn: "k1", At: t0, Action: Terminated, State: Banned, Reason: "auth_error", From: Available}, events[0])
	assert.Equal(t, -time.Duration(1), r.Status.Wait(t0))
}

// M3.3 scenario 8 and the extra-keys guard.
func TestExpired(t *testing.T) {
	tr := New(Config{})
	r := tr.FailAt("k1", Failure{Status: 401, Reason: "auth_error"}, t0)
	assert.Equal(t, Terminated, r.Action)
	assert.Equal(t, time.Duration(0), r.Cooldown)
	assert.Equal(t, Status{State: Expired, Reason: "auth_error"}, tr.StatusAt("k1", t0.Add(time.Hour)))

	tr.RegisterAt("k2", Options{ExtraKeys: true}, t0)
	r = tr.FailAt("k2", Failure{Status: 401, Reason: "auth_error"}, t0)
	assert.Equal(t, Recorded, r.Action)
	assert.True(t, tr.StatusAt("k2", t0).State == Available)
}

// M3.3 scenarios 9, 10 and 19: credits exhausted.
func TestCreditsExhausted(t *testing.T) {
	tr := New(Config{})
	r := tr.FailAt("or", Failure{Status: 402, Reason: "quota_exhausted", Cooldown: ms(120000)}, t0)
	assert.Equal(t, Terminated, r.Action)
	assert.Equal(t, Status{State: CreditsExhausted, Reason: "quota_exhausted"}, r.Status)
	assert.Equal(t, CreditsExhausted, tr.StatusAt("or", t0.Add(time.Hour)).State, "no recovery time: excluded")

	r = tr.FailAt("ds", Failure{Status: 400, Reason: "quota_exhausted", Message: "Insufficient account balance", Cooldown: ms(120000), CreditsExhausted: true}, t0)
	assert.Equal(t, CreditsExhausted, r.Status.State)

	rec := t0.Add(time.Hour)
	tr.FailAt("k3", Failure{Status: 402, Reason: "quota_exhausted", RecoverAt: rec}, t0)
	assert.Equal(t, Status{State: CreditsExhausted, Until: rec, Reason: "quota_exhausted"}, tr.StatusAt("k3", rec.Add(-time.Second)))
	assert.Equal(t, time.Second, tr.StatusAt("k3", rec.Add(-time.Second)).Wait(rec.Add(-time.Second)))
	assert.True(t, tr.StatusAt("k3", rec.Add(time.Second)).State == Available, "selectable 1 s after recovery")

	// A success before the recovery time does not lift it; after it, it does.
	tr.SucceedAt("k3", rec.Add(-time.Second))
	assert.Equal(t, CreditsExhausted, tr.StatusAt("k3", rec.Add(-time.Second)).State)
	tr.SucceedAt("k3", rec.Add(time.Second))
	assert.Equal(t, Status{}, tr.StatusAt("k3", rec.Add(-time.Second)))

	// After recovery a transient failure cools it like any other.
	tr.FailAt("k4", Failure{Status: 402, Reason: "quota_exhausted", RecoverAt: rec}, t0)
	r = tr.FailAt("k4", rateLimit, rec)
	assert.Equal(t, Episode, r.Action)
	assert.Equal(t, Status{State: Cooling, Until: rec.Add(3 * time.Second), Reason: "rate_limit_exceeded", Level: 1}, r.Status)
}

// M3.3 scenario 11: terminal beats transient.
func TestTerminalAbsorbsFailures(t *testing.T) {
	var events []Event
	tr := New(Config{OnChange: func(e Event) { events = append(events, e) }})
	tr.FailAt("k1", Failure{Status: 403, Reason: "auth_error", Message: "account disabled", Permanent: true}, t0)
	row := tr.SnapshotAt(t0)
	require.Len(t, row, 1)
	for _, f := range []Failure{rateLimit, {Status: 401}, {Status: 402}, {Status: 503, Cooldown: time.Hour},
		{Status: 403, Reason: "request_rejected", RequestRejected: true}} {
		r := tr.FailAt("k1", f, t0.Add(time.Minute))
		assert.Equal(t, Absorbed, r.Action)
		assert.Equal(t, time.Duration(0), r.Cooldown)
		assert.Equal(t, Status{State: Banned, Reason: "auth_error"}, r.Status)
		assert.Equal(t, row, tr.SnapshotAt(t0), "the row is unchanged")
	}
	assert.Len(t, events, 1, "only the ban was an event")
	assert.Equal(t, 0, tr.ClearAt(Selector{All: true}, t0), "clearing never lifts a terminal state")
	tr.SucceedAt("k1", t0)
	assert.Equal(t, Banned, tr.StatusAt("k1", t0).State, "a success never lifts a ban")
	assert.Equal(t, 1, tr.ResetAt(Selector{IDs: []string{"k1"}}, t0))
	assert.Equal(t, Status{}, tr.StatusAt("k1", t0))
}

// A terminal verdict is not swallowed by a running cooldown.
func TestTerminalDuringCooldown(t *testing.T) {
	tr := New(Config{})
	tr.FailAt("k1", rateLimit, t0)
	r := tr.FailAt("k1", Failure{Status: 401, Reason: "auth_error"}, t0.Add(time.Second))
	assert.Equal(t, Terminated, r.Action)
	assert.Equal(t, Expired, tr.StatusAt("k1", t0.Add(time.Second)).State)
}

// The anti-thundering-herd rule: failures while cooling change nothing.
func TestAntiHerd(t *testing.T) {
	tr := New(Config{})
	first := tr.FailAt("k1", rateLimit, t0)
	// A backoff failure, and explicit cooldowns that end no later than the
	// episode (t0+3s), change nothing; later ones extend it (D13, see
	// TestLaterLongerHintExtendsCooldown).
	for _, f := range []Failure{rateLimit, {Status: 503, Reason: "server_error", Cooldown: 2 * time.Second}, {Status: 429, RetryAfter: time.Second}} {
		r := tr.FailAt("k1", f, t0.Add(time.Second))
		assert.Equal(t, Absorbed, r.Action)
		assert.Equal(t, 2*time.Second, r.Cooldown)
		assert.Equal(t, first.Status, r.Status)
	}
	// Once the episode has lapsed, the next one escalates (D5): the level
	// stays at 1 in between, and falls to 0 only on success.
	assert.Equal(t, Status{Level: 1}, tr.StatusAt("k1", t0.Add(3*time.Second)))
	r := tr.FailAt("k1", rateLimit, t0.Add(time.Minute))
	assert.Equal(t, ms(6000), r.Cooldown)
	assert.Equal(t, 2, r.Status.Level)
	tr.SucceedAt("k1", t0.Add(2*time.Minute))
	assert.Equal(t, Status{}, tr.StatusAt("k1", t0.Add(2*time.Minute)))
	assert.Equal(t, ms(3000), tr.FailAt("k1", rateLimit, t0.Add(3*time.Minute)).Cooldown)
}

// 200 goroutines failing at once start exactly one episode.
func TestHammerOneEpisode(t *testing.T) {
	var mu sync.Mutex
	episodes := 0
	tr := New(Config{OnChange: func(e Event) {
		if e.State == Cooling {
			mu.Lock()
			episodes++
			mu.Unlock()
		}
	}})
	var wg sync.WaitGroup
	results := make([]Result, 200)
	start := make(chan struct{})
	for i := range results {
		wg.Go(func() {
			<-start
			results[i] = tr.FailAt("k1", rateLimit, t0)
		})
	}
	close(start)
	wg.Wait()
	n := 0
	for _, r := range results {
		if r.Action == Episode {
			n++
		} else {
			assert.Equal(t, Absorbed, r.Action)
		}
	}
	assert.Equal(t, 1, n)
	assert.Equal(t, 1, episodes)
	assert.Equal(t, Status{State: Cooling, Until: t0.Add(3 * time.Second), Reason: "rate_limit_exceeded", Level: 1}, tr.StatusAt("k1", t0))
}

// M3.3 scenario 16: the request-rejected streak.
func TestRequestRejectedStreak(t *testing.T) {
	refusal := Failure{Status: 403, Reason: "request_rejected", Message: "Request not allowed", RequestRejected: true}
	tr := New(Config{})

	r := tr.FailAt("a1", refusal, t0)
	assert.Equal(t, Episode, r.Action)
	assert.Equal(t, 5*time.Minute, r.Cooldown)
	assert.Equal(t, 1, r.Streak)
	for i := 1; i <= 3; i++ {
		r := tr.FailAt("a1", refusal, t0.Add(time.Duration(i)*time.Second))
		assert.Equal(t, Absorbed, r.Action, "refusal at +%ds is not counted", i)
		assert.Equal(t, 1, r.Streak)
	}
	r = tr.FailAt("a1", refusal, t0.Add(5*time.Minute+time.Millisecond))
	assert.Equal(t, Episode, r.Action)
	assert.Equal(t, 15*time.Minute, r.Cooldown)
	assert.Equal(t, 2, r.Streak)
	r = tr.FailAt("a1", refusal, t0.Add(20*time.Minute+2*time.Millisecond))
	assert.Equal(t, Terminated, r.Action)
	assert.Equal(t, Status{State: Banned, Reason: "request_rejected"}, r.Status)
	assert.Equal(t, 0, r.Streak)
	info := tr.SnapshotAt(t0.Add(time.Hour))
	require.Len(t, info, 1)
	assert.Equal(t, "3 consecutive refusals: Request not allowed", info[0].LastError)

	// A success in between restarts the streak at 1.
	tr.FailAt("a2", refusal, t0)
	tr.SucceedAt("a2", t0.Add(6*time.Minute))
	r = tr.FailAt("a2", refusal, t0.Add(7*time.Minute))
	assert.Equal(t, 1, r.Streak)
	assert.Equal(t, 5*time.Minute, r.Cooldown)

	// The streak forgets after 24 h.
	tr.FailAt("a3", refusal, t0)
	r = tr.FailAt("a3", refusal, t0.Add(24*time.Hour))
	assert.Equal(t, 1, r.Streak)

	// Without cooling, refusals inside the episode are still one episode.
	tr.RegisterAt("a4", Options{DisableCooling: true}, t0)
	assert.Equal(t, Recorded, tr.FailAt("a4", refusal, t0).Action)
	r = tr.FailAt("a4", refusal, t0.Add(time.Second))
	assert.Equal(t, Absorbed, r.Action)
	assert.Equal(t, 1, r.Streak)
	assert.True(t, tr.StatusAt("a4", t0).State == Available)
}

// M3.3 scenario 17: re-checks of an expired connection.
func TestRecheckSchedule(t *testing.T) {
	tr := New(Config{})
	due, at := tr.RecheckDueAt("o1", t0)
	assert.False(t, due)
	assert.True(t, at.IsZero())

	tr.FailAt("o1", Failure{Status: 401, Reason: "auth_error"}, t0)
	due, at = tr.RecheckDueAt("o1", t0.Add(4*time.Minute))
	assert.False(t, due)
	assert.Equal(t, t0.Add(5*time.Minute), at)
	due, _ = tr.RecheckDueAt("o1", t0.Add(5*time.Minute))
	assert.True(t, due)

	last := t0.Add(5 * time.Minute)
	assert.Equal(t, 1, tr.RecheckedAt("o1", last))
	due, at = tr.RecheckDueAt("o1", last.Add(9*time.Minute))
	assert.False(t, due, "retry count 1, last retry 9 min ago: skipped")
	assert.Equal(t, last.Add(10*time.Minute), at)
	due, _ = tr.RecheckDueAt("o1", last.Add(10*time.Minute))
	assert.True(t, due, "at 10 min: retried")

	assert.Equal(t, 2, tr.RecheckedAt("o1", last.Add(10*time.Minute)))
	assert.Equal(t, 3, tr.RecheckedAt("o1", last.Add(30*time.Minute)))
	due, at = tr.RecheckDueAt("o1", last.Add(1000*time.Hour))
	assert.False(t, due, "retry count 3: never")
	assert.True(t, at.IsZero())
	assert.Equal(t, 0, tr.RecheckedAt("k9", t0))
}

// M3.3 scenario 18: disableCooling.
func TestDisableCooling(t *testing.T) {
	tr := New(Config{})
	tr.RegisterAt("k1", Options{DisableCooling: true}, t0)
	for i := 1; i <= 7; i++ {
		r := tr.FailAt("k1", Failure{Status: 503, Reason: "server_error", Message: "upstream down", Backoff: true}, t0)
		assert.Equal(t, Recorded, r.Action)
		assert.Equal(t, Status{Level: min(i, 5)}, r.Status)
	}
	info := tr.SnapshotAt(t0)
	require.Len(t, info, 1)
	assert.Equal(t, Info{Conn: "k1", Status: Status{Level: 5}, LastError: "upstream down", Reason: "server_error", ErrorStatus: 503, LastErrorAt: t0}, info[0])
	assert.Equal(t, Terminated, tr.FailAt("k1", Failure{Status: 401}, t0).Action, "terminal states still apply")
}

func TestSucceedClears(t *testing.T) {
	tr := New(Config{})
	tr.RegisterAt("k1", Options{Provider: "openai"}, t0)
	tr.FailAt("k1", rateLimit, t0)
	tr.SucceedAt("k1", t0.Add(time.Second))
	assert.Equal(t, []Info{{Conn: "k1", Provider: "openai"}}, tr.SnapshotAt(t0))
	tr.SucceedAt("unknown", t0)
	assert.Empty(t, New(Config{}).SnapshotAt(t0))
}

func TestClockBackwards(t *testing.T) {
	tr := New(Config{})
	r := tr.FailAt("k1", rateLimit, t0)
	// Earlier than the failure: still cooling, and absorbed.
	assert.Equal(t, Cooling, tr.StatusAt("k1", t0.Add(-time.Hour)).State)
	assert.Equal(t, Absorbed, tr.FailAt("k1", rateLimit, t0.Add(-time.Hour)).Action)
	assert.Equal(t, r.Status, tr.StatusAt("k1", t0))

	refusal := Failure{Status: 403, Reason: "request_rejected", RequestRejected: true}
	tr.FailAt("a1", refusal, t0)
	r = tr.FailAt("a1", refusal, t0.Add(-time.Hour))
	assert.Equal(t, Absorbed, r.Action)

	tr.FailAt("o1", Failure{Status: 401}, t0)
	due, _ := tr.RecheckDueAt("o1", t0.Add(-time.Hour))
	assert.False(t, due)
}

func TestClearAndReset(t *testing.T) {
	tr := New(Config{})
	tr.RegisterAt("a", Options{Provider: "openai"}, t0)
	tr.RegisterAt("b", Options{Provider: "OpenAI"}, t0)
	tr.RegisterAt("c", Options{Provider: "anthropic"}, t0)
	for _, c := range []string{"a", "c", "x"} {
		tr.FailAt(c, rateLimit, t0)
	}
	tr.FailAt("b", Failure{Status: 403, Permanent: true}, t0)

	assert.Equal(t, 0, tr.ClearAt(Selector{}, t0), "the zero selector picks nothing")
	assert.Equal(t, 1, tr.ClearAt(Selector{Provider: "openai"}, t0))
	assert.True(t, tr.StatusAt("a", t0).State == Available)
	assert.Equal(t, Banned, tr.StatusAt("b", t0).State)
	assert.Equal(t, Cooling, tr.StatusAt("c", t0).State)

	assert.Equal(t, 0, tr.ClearAt(Selector{IDs: []string{"c"}, Provider: "openai"}, t0))
	assert.Equal(t, 2, tr.ClearAt(Selector{IDs: []string{"c", "x", "nope"}}, t0))
	assert.Equal(t, Status{}, tr.StatusAt("c", t0))
	assert.Equal(t, Status{}, tr.StatusAt("x", t0))

	assert.Equal(t, 1, tr.ResetAt(Selector{All: true}, t0))
	assert.Equal(t, Status{}, tr.StatusAt("b", t0))
	assert.Equal(t, 0, tr.ResetAt(Selector{All: true}, t0))

	tr.ForgetAt("a", t0)
	names := []string{}
	for _, i := range tr.SnapshotAt(t0) {
		names = append(names, i.Conn)
	}
	assert.Equal(t, []string{"b", "c"}, names)
}

func TestFormatWait(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"}, {-time.Second, "0s"}, {time.Millisecond, "1s"}, {time.Second, "1s"},
		{125 * time.Second, "2m 5s"}, {time.Hour, "1h"}, {time.Hour + 2*time.Minute + 3*time.Second, "1h 2m 3s"},
		{time.Hour + 3*time.Second, "1h 3s"}, {2*time.Minute + 500*time.Millisecond, "2m 1s"}, {49 * time.Hour, "49h"},
		{time.Duration(1<<63 - 1), "2562047h 47m 17s"},
	} {
		assert.Equal(t, tt.want, formatWait(tt.d), "formatWait(%v)", tt.d)
	}
}

// Every refusal is an *Error with the contract's code and status, whose
// Unwrap is the code's sentinel.
func TestRefusalIsErrorWithCodeStatusAndSentinel(t *testing.T) {
	tr := New(Config{})
	require.NoError(t, tr.CheckAt("k1", t0))
	tr.FailAt("k1", rateLimit, t0)
	err := tr.CheckAt("k1", t0.Add(time.Second))
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrCooling))
	assert.False(t, errors.Is(err, ErrUnavailable))
	var ce *Error
	require.True(t, errors.As(err, &ce))
	assert.Equal(t, &Error{Code: CodeCooling, Status: 429, Conn: "k1", State: Cooling, Until: t0.Add(3 * time.Second),
		RetryAfter: 2 * time.Second, Reason: "rate_limit_exceeded", err: ErrCooling}, ce)
	assert.Equal(t, ErrCooling, errors.Unwrap(err))
	assert.Equal(t, "cooldown: connection_cooldown: connection k1 cooling until 2026-03-01T12:00:03Z, reset after 2s (rate_limit_exceeded)", err.Error())

	tr.FailAt("k2", Failure{Status: 401, Reason: "auth_error"}, t0)
	err = tr.CheckAt("k2", t0)
	assert.True(t, errors.Is(err, ErrUnavailable))
	assert.False(t, errors.Is(err, ErrCooling))
	require.True(t, errors.As(err, &ce))
	assert.Equal(t, &Error{Code: CodeUnavailable, Status: 503, Conn: "k2", State: Expired, Reason: "auth_error", err: ErrUnavailable}, ce)
	assert.Equal(t, "cooldown: unavailable: connection k2 expired (auth_error)", err.Error())

	// Credits exhausted with a known recovery time is unavailable, with
	// the wait until the recovery.
	rec := t0.Add(time.Hour)
	tr.FailAt("k3", Failure{Status: 402, Reason: "quota_exhausted", RecoverAt: rec}, t0)
	require.True(t, errors.As(tr.CheckAt("k3", t0), &ce))
	assert.Equal(t, &Error{Code: CodeUnavailable, Status: 503, Conn: "k3", State: CreditsExhausted, Until: rec,
		RetryAfter: time.Hour, Reason: "quota_exhausted", err: ErrUnavailable}, ce)
	assert.Equal(t, "cooldown: unavailable: connection k3 credits_exhausted until 2026-03-01T13:00:00Z, reset after 1h (quota_exhausted)", ce.Error())

	// The sentinels are plain values: matching never depends on any state.
	assert.Equal(t, "cooldown: connection_cooldown", ErrCooling.Error())
	assert.Equal(t, "cooldown: unavailable", ErrUnavailable.Error())
	assert.Equal(t, "cooldown: invalid_config", ErrInvalidConfig.Error())
	assert.False(t, errors.Is(ErrCooling, ErrUnavailable))
}

func TestStatusString(t *testing.T) {
	assert.Equal(t, "available (level 2)", Status{Level: 2}.String())
	assert.Equal(t, "banned (auth_error, level 0)", Status{State: Banned, Reason: "auth_error"}.String())
	assert.Equal(t, "cooling until 2026-03-01T12:00:00Z (x, level 1)", Status{State: Cooling, Until: t0, Reason: "x", Level: 1}.String())
}

func TestNames(t *testing.T) {
	assert.Equal(t, []string{"available", "cooling", "banned", "expired", "credits_exhausted", "unknown"},
		[]string{Available.String(), Cooling.String(), Banned.String(), Expired.String(), CreditsExhausted.String(), State(9).String()})
	assert.Equal(t, "episode", Episode.String())
	assert.Equal(t, "unknown", Action(9).String())
	assert.Equal(t, []string{"recorded", "episode", "absorbed", "terminated", "extended", "succeeded", "cleared", "reset", "dropped"},
		[]string{Recorded.String(), Episode.String(), Absorbed.String(), Terminated.String(), Extended.String(),
			Succeeded.String(), Cleared.String(), Reset.String(), Dropped.String()})
}

func TestMessageTruncated(t *testing.T) {
	tr := New(Config{})
	tr.RegisterAt("k1", Options{Provider: "p"}, t0)
	long := ""
	for range 60 {
		long += "é"
	}
	tr.FailAt("k1", Failure{Status: 500, Message: long}, t0)
	got := tr.SnapshotAt(t0)[0].LastError
	assert.Equal(t, 100, len(got))
	assert.Equal(t, long[:100], got)
	assert.Equal(t, "ab", truncate("abc", 2))
	assert.Equal(t, "a", truncate("aé", 2), "cut at a rune boundary")
}

// RegisterAt decides at the time it is given whether an untagged entry
// still carries information.
func TestRegisterAt(t *testing.T) {
	tr := New(Config{})
	quota := Failure{Status: 429, Reason: "quota_exhausted", Cooldown: time.Minute}
	tr.FailAt("k1", quota, t0)
	tr.RegisterAt("k1", Options{Provider: "openai", Class: routeguard.OAuth}, t0)
	require.Len(t, tr.SnapshotAt(t0), 1)
	assert.Equal(t, Info{Conn: "k1", Provider: "openai", Class: routeguard.OAuth,
		Status: Status{State: Cooling, Until: t0.Add(time.Minute), Reason: "quota_exhausted"},
		Reason: "quota_exhausted", ErrorStatus: 429, LastErrorAt: t0,
	}, tr.SnapshotAt(t0)[0])

	// Untagged while still cooling: the cooldown is kept.
	tr.RegisterAt("k1", Options{}, t0.Add(30*time.Second))
	assert.Equal(t, Status{State: Cooling, Until: t0.Add(time.Minute), Reason: "quota_exhausted"}, tr.StatusAt("k1", t0.Add(30*time.Second)))
	// Untagged after the cooldown, at level 0: nothing left to keep.
	tr.RegisterAt("k1", Options{}, t0.Add(2*time.Minute))
	assert.Empty(t, tr.SnapshotAt(t0))
}
