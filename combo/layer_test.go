package combo_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/cooldown"
)

// freeTier is a user layer: a provider whose free tier is drained is kept
// out until the tier refills.
type freeTier struct {
	mu      sync.Mutex
	drained map[string]time.Time // provider → refill time
	reports []string
}

func (f *freeTier) Check(t *combo.Target, now time.Time) (string, time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if until, ok := f.drained[t.Provider]; ok && now.Before(until) {
		return "free_tier_drained", until, false
	}
	return "", time.Time{}, true
}

func (f *freeTier) Report(t *combo.Target, a combo.Attempt, _ time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reports = append(f.reports, fmt.Sprintf("%s %s %d", t.Provider, a.Outcome, a.Status))
}

func ExampleLayer() {
	alibaba, openai := combotest.New(), combotest.New()
	defer alibaba.Close()
	defer openai.Close()
	upstreams := map[string]*combotest.Upstream{"alibaba": alibaba, "openai": openai}

	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tier := &freeTier{drained: map[string]time.Time{"alibaba": now.Add(6 * time.Hour)}}
	r := combo.New(combo.Config{Layers: []combo.Layer{tier}, Now: func() time.Time { return now }})
	c := &combo.Combo{Name: "cheap", Targets: []combo.Target{
		{Provider: "alibaba", Connection: "ali-1", Model: "qwen-max"},
		{Provider: "openai", Connection: "sk-1", Model: "gpt-4o-mini"},
	}}
	send := func(ctx context.Context, t *combo.Target) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+t.Provider+".test/v1/chat/completions", nil)
		req.Header.Set("Authorization", "Bearer "+t.Connection)
		return upstreams[t.Provider].Transport().RoundTrip(req)
	}

	res, err := r.Do(context.Background(), combo.Request{Combo: c}, send)
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Response.Body.Close()
	for _, x := range res.Excluded {
		fmt.Println("excluded:", x.Provider, x.Reason, x.RetryAfter)
	}
	fmt.Println("served by", res.Target.Provider)
	fmt.Println("reported:", tier.reports)
	// Output:
	// excluded: alibaba free_tier_drained 6h0m0s
	// served by openai
	// reported: [openai succeeded 200]
}

// A user layer's exclusion is checked after the built-in layers: a target
// the connection cooldown already holds keeps the built-in reason.
func TestUserLayerCheckedAfterBuiltInLayers(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tier := &freeTier{drained: map[string]time.Time{"alibaba": now.Add(time.Hour), "openai": now.Add(time.Hour)}}
	cd := cooldown.New(cooldown.Config{})
	cd.FailAt("sk-1", cooldown.Failure{Status: 429, Cooldown: 10 * time.Minute}, now)
	r := combo.New(combo.Config{Cooldowns: cd, Layers: []combo.Layer{tier}, Now: func() time.Time { return now }})
	c := &combo.Combo{Name: "c", Targets: []combo.Target{
		{Provider: "alibaba", Connection: "ali-1", Model: "m"},
		{Provider: "openai", Connection: "sk-1", Model: "m"},
	}}
	_, err := r.Do(context.Background(), combo.Request{Combo: c}, nil)
	var te *combo.Error
	require.ErrorAs(t, err, &te)
	require.Len(t, te.Excluded, 2)
	assert.Equal(t, combo.Reason("free_tier_drained"), te.Excluded[0].Reason)
	assert.Equal(t, time.Hour, te.Excluded[0].RetryAfter)
	assert.Equal(t, combo.ReasonConnectionCooldown, te.Excluded[1].Reason)
}

// A pool held back only by user-layer exclusions with a recovery time is a
// 503 whose Retry-After is the earliest recovery; the diagnostics carry the
// user's reason.
func TestUserLayerExclusionAnswers503WithItsRetryAfter(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tier := &freeTier{drained: map[string]time.Time{"alibaba": now.Add(90 * time.Second), "qwen": now.Add(10 * time.Minute)}}
	r := combo.New(combo.Config{Layers: []combo.Layer{tier}, Now: func() time.Time { return now }})
	c := &combo.Combo{Name: "c", Targets: []combo.Target{
		{Provider: "alibaba", Connection: "ali-1", Model: "m"},
		{Provider: "qwen", Connection: "q-1", Model: "m"},
	}}
	calls := 0
	_, err := r.Do(context.Background(), combo.Request{Combo: c}, func(context.Context, *combo.Target) (*http.Response, error) {
		calls++
		return nil, nil
	})
	var te *combo.Error
	require.ErrorAs(t, err, &te)
	assert.Equal(t, 0, calls)
	assert.Equal(t, http.StatusServiceUnavailable, te.Status)
	assert.Equal(t, combo.TerminalAllCoolingDown, te.TerminalReason)
	assert.Equal(t, 90*time.Second, te.RetryAfter)
	assert.Equal(t, "90", combo.TerminalHeader(te).Get("Retry-After"))
	b := combo.TerminalBody(te)
	require.Len(t, b.Diagnostics.Excluded, 2)
	assert.Equal(t, combo.Reason("free_tier_drained"), b.Diagnostics.Excluded[0].Reason)
	assert.Equal(t, int64(90), b.Diagnostics.Excluded[0].RetryAfterSeconds)
	assert.Equal(t, int64(600), b.Diagnostics.Excluded[1].RetryAfterSeconds)
}

// A user-layer exclusion with no recovery time is like unavailable: alone
// it is the 404 no_executable_targets answer; an empty reason reads as
// layer_refused.
func TestUserLayerExclusionWithoutTimeIsNotExecutable(t *testing.T) {
	r := combo.New(combo.Config{Layers: []combo.Layer{refuseAll{}}})
	c := &combo.Combo{Name: "c", Targets: []combo.Target{{Provider: "p", Connection: "c1", Model: "m"}}}
	_, err := r.Do(context.Background(), combo.Request{Combo: c}, nil)
	var te *combo.Error
	require.ErrorAs(t, err, &te)
	assert.Equal(t, http.StatusNotFound, te.Status)
	assert.Equal(t, combo.TerminalNoExecutable, te.TerminalReason)
	require.Len(t, te.Excluded, 1)
	assert.Equal(t, combo.Reason("layer_refused"), te.Excluded[0].Reason)
	assert.Zero(t, te.Excluded[0].RetryAfter)
}

type refuseAll struct{}

func (refuseAll) Check(*combo.Target, time.Time) (string, time.Time, bool) {
	return "", time.Time{}, false
}
func (refuseAll) Report(*combo.Target, combo.Attempt, time.Time) {}

// Report is called for every attempt made, failed ones and same-target
// retries included, with the attempt's trail entry.
func TestUserLayerReportSeesEveryAttempt(t *testing.T) {
	a, b := combotest.New(), combotest.New()
	defer a.Close()
	defer b.Close()
	a.Script("k1", combotest.Error(http.StatusServiceUnavailable, "overloaded"))
	ups := map[string]*combotest.Upstream{"a": a, "b": b}
	tier := &freeTier{}
	r := combo.New(combo.Config{Layers: []combo.Layer{tier}})
	c := &combo.Combo{Name: "c", Targets: []combo.Target{
		{Provider: "a", Connection: "k1", Model: "m"},
		{Provider: "b", Connection: "k2", Model: "m"},
	}}
	res, err := r.Do(context.Background(), combo.Request{Combo: c}, func(ctx context.Context, t *combo.Target) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://x.test/v1/chat/completions", strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+t.Connection)
		return ups[t.Provider].Transport().RoundTrip(req)
	})
	require.NoError(t, err)
	res.Response.Body.Close()
	assert.Equal(t, []string{"a failed 503", "b succeeded 200"}, tier.reports)
}

// countingLayer counts its checks per provider and refuses the providers
// named in refuse, which its Report fills: a failed attempt on a target
// keeps every target of refuseOnFail out from then on.
type countingLayer struct {
	mu           sync.Mutex
	checks       map[string]int
	refuse       map[string]bool
	refuseOnFail []string
}

func (l *countingLayer) Check(t *combo.Target, _ time.Time) (string, time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.checks[t.Provider]++
	if l.refuse[t.Provider] {
		return "drained", time.Time{}, false
	}
	return "", time.Time{}, true
}

func (l *countingLayer) Report(_ *combo.Target, a combo.Attempt, _ time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if a.Outcome == combo.OutcomeFailed {
		for _, p := range l.refuseOnFail {
			l.refuse[p] = true
		}
	}
}

// The layers are asked about every target at the screening, and again
// right before each attempt, except the first attempt of a screening made
// at the same clock reading with nothing waited for since: the screening's
// answer is the answer then. A target refused between the screening and its
// turn is skipped at dispatch.
func TestLayersAskedOncePerScreeningForTheFirstAttempt(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	l := &countingLayer{checks: map[string]int{}, refuse: map[string]bool{}, refuseOnFail: []string{"b"}}
	r := combo.New(combo.Config{Layers: []combo.Layer{l}, Now: func() time.Time { return now }})
	c := &combo.Combo{Name: "c", Targets: []combo.Target{
		{Provider: "a", Connection: "k1", Model: "m"},
		{Provider: "b", Connection: "k2", Model: "m"},
		{Provider: "c", Connection: "k3", Model: "m"},
	}}
	var sent []string
	res, err := r.Do(context.Background(), combo.Request{Combo: c}, func(_ context.Context, t *combo.Target) (*http.Response, error) {
		sent = append(sent, t.Provider)
		status := http.StatusOK
		if t.Provider == "a" {
			status = http.StatusServiceUnavailable
		}
		return &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("{}"))}, nil
	})
	require.NoError(t, err)
	res.Response.Body.Close()
	assert.Equal(t, []string{"a", "c"}, sent)
	assert.Equal(t, map[string]int{"a": 1, "b": 2, "c": 2}, l.checks)
	require.Len(t, res.Attempts, 3)
	assert.Equal(t, combo.OutcomeSkipped, res.Attempts[1].Outcome)
	assert.Equal(t, combo.Reason("drained"), res.Attempts[1].Reason)
	assert.Equal(t, "c", res.Target.Provider)
}
