package combo_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/combotest"
)

func TestParseToolLimit(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
		limit  int
		ok     bool
	}{
		{"openai array too long", 400, `{"error":{"message":"Invalid 'tools': array too long. Expected an array with maximum length 128, but got an array with length 200 instead.","param":"tools"}}`, 128, true},
		{"tools colon array too long", 400, `tools: array too long (maximum 64)`, 64, true},
		{"maximum of N tools", 400, `A maximum of 64 tools is supported`, 64, true},
		{"at most N functions", 422, `you may provide at most 32 functions`, 32, true},
		{"too many tools without number", 400, `Too many tools provided`, -1, true},
		{"too many tools with limit", 400, `Too many tools: the limit is 20`, 20, true},
		{"tool count exceeds", 413, `tool count exceeds the limit of 100`, 100, true},
		{"number of tools", 400, `The number of tools must be less than or equal to maximum 50`, 50, true},
		{"status zero accepted", 0, `too many tools`, -1, true},
		{"function declarations", 400, `At most 128 function declarations can be specified`, 128, true},
		{"too many functions with max", 400, `Too many functions: max 16`, 16, true},
		{"huge number is unusable", 400, `maximum of 999999999 tools`, -1, true},
		{"messages array too long", 400, `Invalid 'messages': array too long. Expected maximum length 2048`, 0, false},
		{"rate limit about tools", 429, `too many tools requests`, 0, false},
		{"server error", 500, `too many tools`, 0, false},
		{"unrelated 400", 400, `missing field messages`, 0, false},
		{"tool error but no limit", 400, `tool_choice must name a tool`, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			limit, ok := combo.ParseToolLimit(tt.status, []byte(tt.body))
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.limit, limit)
		})
	}
}

func FuzzParseToolLimit(f *testing.F) {
	f.Add(400, []byte(`Invalid 'tools': array too long. Expected an array with maximum length 128`))
	f.Add(400, []byte(`too many tools`))
	f.Add(422, []byte(`maximum of 64 tools`))
	f.Add(500, []byte(`boom`))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		limit, ok := combo.ParseToolLimit(status, body)
		if !ok {
			if limit != 0 {
				t.Fatalf("limit %d without a match", limit)
			}
			return
		}
		if limit < -1 || limit > 100000 {
			t.Fatalf("limit %d out of range", limit)
		}
		if status != 0 && (status < 400 || status > 499) {
			t.Fatalf("matched status %d", status)
		}
	})
}

func TestToolLimitsRememberAndExpire(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var learned []combo.ToolLimit
	l := combo.NewToolLimits(combo.ToolLimitConfig{TTL: 10 * time.Minute, MaxEntries: 2,
		OnLearn: func(x combo.ToolLimit) { learned = append(learned, x) }})

	l.LearnAt("openai", "gpt", 128, now)
	lim, ok := l.LimitAt("openai", "gpt", now.Add(time.Minute))
	require.True(t, ok)
	assert.Equal(t, 128, lim)
	assert.True(t, l.Allows("openai", "gpt", 128, now))
	assert.False(t, l.Allows("openai", "gpt", 129, now))
	assert.True(t, l.Allows("openai", "other", 500, now), "unknown models take anything")
	assert.True(t, l.Allows("openai", "gpt", 0, now), "no tools always pass")

	l.LearnAt("openai", "gpt", 200, now.Add(time.Minute))
	lim, _ = l.LimitAt("openai", "gpt", now.Add(time.Minute))
	assert.Equal(t, 128, lim, "a looser limit does not replace a live strict one")
	l.LearnAt("openai", "gpt", 64, now.Add(2*time.Minute))
	lim, _ = l.LimitAt("openai", "gpt", now.Add(2*time.Minute))
	assert.Equal(t, 64, lim, "a stricter limit replaces at once")
	assert.Equal(t, []combo.ToolLimit{
		{Provider: "openai", Model: "gpt", Limit: 128, Until: now.Add(10 * time.Minute)},
		{Provider: "openai", Model: "gpt", Limit: 64, Until: now.Add(12 * time.Minute)},
	}, learned, "the hook sees stored limits only")

	_, ok = l.LimitAt("openai", "gpt", now.Add(12*time.Minute))
	assert.False(t, ok, "expired exactly one TTL after the last learn")
	_, ok = l.LimitAt("openai", "gpt", now.Add(-time.Hour))
	assert.True(t, ok, "time going backwards keeps the entry")

	// Bounded: a third pair evicts the one closest to expiry.
	l.LearnAt("a", "m", 1, now.Add(3*time.Minute))
	l.LearnAt("b", "m", 2, now.Add(4*time.Minute))
	snap := l.SnapshotAt(now.Add(4 * time.Minute))
	require.Len(t, snap, 2)
	assert.Equal(t, combo.ToolLimit{Provider: "a", Model: "m", Limit: 1, Until: now.Add(13 * time.Minute)}, snap[0])
	assert.Equal(t, "b", snap[1].Provider)

	// Expired entries are pruned first on write.
	l.LearnAt("c", "m", 3, now.Add(20*time.Minute))
	snap = l.SnapshotAt(now.Add(20 * time.Minute))
	require.Len(t, snap, 1)
	assert.Equal(t, "c", snap[0].Provider)

	l.Forget("c", "m")
	assert.Empty(t, l.SnapshotAt(now.Add(20*time.Minute)))
	l.LearnAt("x", "m", -1, now)
	assert.Empty(t, l.SnapshotAt(now), "negative limits are ignored")
}

func TestToolLimitConfigNormalize(t *testing.T) {
	c := combo.ToolLimitConfig{}.Normalize()
	assert.Equal(t, time.Hour, c.TTL)
	assert.Equal(t, 10000, c.MaxEntries)
	c = combo.ToolLimitConfig{TTL: time.Second, MaxEntries: 1 << 30}.Normalize()
	assert.Equal(t, time.Minute, c.TTL)
	assert.Equal(t, 1000000, c.MaxEntries)
	assert.Equal(t, 7*24*time.Hour, combo.ToolLimitConfig{TTL: 1000 * time.Hour}.Normalize().TTL)
}

func FuzzToolLimitConfigNormalize(f *testing.F) {
	f.Add(int64(0), 0)
	f.Add(int64(-5), -5)
	f.Add(int64(1<<62), 1<<40)
	f.Fuzz(func(t *testing.T, ttl int64, entries int) {
		c := combo.ToolLimitConfig{TTL: time.Duration(ttl), MaxEntries: entries}.Normalize()
		if c.TTL < time.Minute || c.TTL > 7*24*time.Hour || c.MaxEntries < 1 || c.MaxEntries > 1000000 {
			t.Fatalf("out of range: %+v", c)
		}
		if n := c.Normalize(); n.TTL != c.TTL || n.MaxEntries != c.MaxEntries {
			t.Fatalf("not idempotent: %+v", c)
		}
	})
}

const toolsTooLong = `Invalid 'tools': array too long. Expected an array with maximum length 128, but got an array with length 200 instead.`

func TestToolLimitLearnedAndTargetSkipped(t *testing.T) {
	f := newFleet(t, "openai", "anthropic")
	f.cfg.ToolLimits = combo.NewToolLimits(combo.ToolLimitConfig{})
	f.rebuild()
	f.up["openai"].Script("k1", combotest.Error(400, toolsTooLong), combotest.OK("fine"))
	c := &combo.Combo{Name: "tools", Targets: []combo.Target{target("openai", "k1", "gpt-4o"), target("anthropic", "a1", "claude")}}
	withTools := func(n int) func(*combo.Request) { return func(r *combo.Request) { r.Tools = n } }

	res, err := f.do(t, c, withTools(200))
	require.NoError(t, err)
	assert.Equal(t, []string{
		"openai/k1/gpt-4o:failed:Bad Request",
		"anthropic/a1/claude:succeeded:OK",
	}, outcomes(res))
	assert.Equal(t, string(combo.ReasonToolLimit), res.Attempts[0].Code)
	lim, ok := f.cfg.ToolLimits.LimitAt("openai", "gpt-4o", time.Now())
	require.True(t, ok)
	assert.Equal(t, 128, lim)

	res, err = f.do(t, c, withTools(200))
	require.NoError(t, err)
	assert.Equal(t, []string{"anthropic/a1/claude:succeeded:OK"}, outcomes(res))
	assert.Equal(t, 1, f.up["openai"].Total(), "the refusing target is skipped before dispatch")

	res, err = f.do(t, c, withTools(100))
	require.NoError(t, err)
	assert.Equal(t, "openai", res.Target.Provider, "a request within the limit still goes there")

	only := &combo.Combo{Name: "only", Targets: []combo.Target{target("openai", "k1", "gpt-4o")}}
	_, err = f.router.Do(context.Background(), combo.Request{Combo: only, Tools: 200}, f.send)
	var te *combo.Error
	require.ErrorAs(t, err, &te)
	assert.Equal(t, 400, te.Status, "no target can take 200 tools: the request must change")
	assert.Equal(t, combo.TerminalCapability, te.Code)
	assert.ErrorIs(t, err, combo.ErrCapabilityMismatch)
	assert.Equal(t, "change-request", combo.TerminalHeader(te).Get("X-Omniroute-Recovery-Action"))
	assert.Empty(t, combo.TerminalHeader(te).Get("Retry-After"))
	require.Len(t, te.Excluded, 1)
	assert.Equal(t, combo.ReasonToolLimit, te.Excluded[0].Reason)
	assert.Equal(t, "No target of only can take this request: openai/gpt-4o: tool_limit", combo.TerminalBody(te).Error.Message)
}

func TestToolLimitWithoutNumberAssumesOneFewer(t *testing.T) {
	f := newFleet(t, "openai", "anthropic")
	f.cfg.ToolLimits = combo.NewToolLimits(combo.ToolLimitConfig{})
	f.rebuild()
	f.up["openai"].Script("k1", combotest.Error(400, "too many tools"))
	c := &combo.Combo{Name: "tools", Targets: []combo.Target{target("openai", "k1", "gpt-4o"), target("anthropic", "a1", "claude")}}
	_, err := f.do(t, c, func(r *combo.Request) { r.Tools = 40 })
	require.NoError(t, err)
	lim, ok := f.cfg.ToolLimits.LimitAt("openai", "gpt-4o", time.Now())
	require.True(t, ok)
	assert.Equal(t, 39, lim)
}

func TestToolLimitsConcurrentUse(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := combo.NewToolLimits(combo.ToolLimitConfig{MaxEntries: 8})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				model := string(rune('a' + (g+i)%12))
				l.LearnAt("p", model, 10+i%5, now.Add(time.Duration(i)*time.Second))
				l.Allows("p", model, 12, now)
				l.SnapshotAt(now)
			}
		})
	}
	wg.Wait()
	assert.LessOrEqual(t, len(l.SnapshotAt(now)), 8, "the memory stays bounded")
}

func BenchmarkParseToolLimit(b *testing.B) {
	body := []byte(toolsTooLong)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := combo.ParseToolLimit(400, body); !ok {
			b.Fatal("not parsed")
		}
	}
}

// A learned limit expires after its TTL on the router's clock: until then
// the refusing target is screened out before dispatch, afterwards it is
// asked again.
func TestToolLimitExpiresOnRouterClock(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	f := newFleet(t, "openai", "anthropic")
	f.cfg.Now = clock
	f.cfg.ToolLimits = combo.NewToolLimits(combo.ToolLimitConfig{TTL: 10 * time.Minute})
	f.rebuild()
	f.up["openai"].Script("k1", combotest.Error(400, toolsTooLong), combotest.OK("fine"))
	c := &combo.Combo{Name: "tools", Targets: []combo.Target{target("openai", "k1", "gpt-4o"), target("anthropic", "a1", "claude")}}
	withTools := func(r *combo.Request) { r.Tools = 200 }

	res, err := f.do(t, c, withTools)
	require.NoError(t, err)
	assert.Equal(t, "anthropic", res.Target.Provider)
	assert.Equal(t, []combo.ToolLimit{{Provider: "openai", Model: "gpt-4o", Limit: 128, Until: now.Add(10 * time.Minute)}},
		f.cfg.ToolLimits.SnapshotAt(now))

	advance(10*time.Minute - time.Second)
	res, err = f.do(t, c, withTools)
	require.NoError(t, err)
	assert.Equal(t, []string{"anthropic/a1/claude:succeeded:OK"}, outcomes(res), "still skipped one second before expiry")
	assert.Equal(t, 1, f.up["openai"].Total())

	advance(time.Second)
	res, err = f.do(t, c, withTools)
	require.NoError(t, err)
	assert.Equal(t, []string{"openai/k1/gpt-4o:succeeded:OK"}, outcomes(res), "asked again once the limit expired")
	assert.Equal(t, 2, f.up["openai"].Total())
	assert.Empty(t, f.cfg.ToolLimits.SnapshotAt(now))
}
