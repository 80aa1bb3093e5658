package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/examples/gateway/gw"
)

// chaosUpstream is one fake provider of the chaos test and its seeded
// faults.
type chaosUpstream struct {
	id    string
	chaos combotest.Chaos
}

// The upstreams of TestE2EChaosSeededUpstreams. Each seed fixes its
// upstream's fault sequence: the n-th call it receives gets the same fault
// and added latency in every run.
var chaosUpstreams = []chaosUpstream{
	{"alpha", combotest.Chaos{Seed: 17, ServerError: 0.15, RateLimit: 0.10, Reset: 0.05, Stall: 0.08,
		RetryAfter: 2 * time.Second, Latency: 20 * time.Millisecond}},
	{"beta", combotest.Chaos{Seed: 29, ServerError: 0.10, RateLimit: 0.10, Reset: 0.05, Stall: 0.05,
		Latency: 30 * time.Millisecond}},
	{"gamma", combotest.Chaos{Seed: 41, ServerError: 0.05, Stall: 0.03, Latency: 10 * time.Millisecond}},
}

// TestE2EChaosSeededUpstreams drives the built gateway with concurrent
// plain and streamed requests while its three upstreams inject seeded
// faults (503s, 429s with Retry-After, connection resets, answers that
// stall halfway, added latency). Every answer the client gets is truthful
// and in bounded time:
//   - a 200 is the whole answer of the target it names: a complete
//     completion, or an event stream of chunks ending in [DONE]; a stream
//     that an upstream's stall broke after its commit ends with an error the
//     client sees (never a clean end), and there are no more of those than
//     stalled streamed calls;
//   - any other answer is 429, 502, 503 or 504 with an OpenAI-style JSON
//     error, and a Retry-After, where there is one (always on a 429 and a
//     503 all_targets_cooling_down), is an integer of seconds in 1..86400;
//   - no request takes longer than the configured bound: MaxAttempts
//     attempts of at most the per-target timeout plus the same-target
//     retry's pause each.
//
// The fault sequence of each upstream is the one its seed gives: a fresh
// upstream with the same Chaos draws the same faults and latencies for the
// same number of calls.
func TestE2EChaosSeededUpstreams(t *testing.T) {
	const (
		workers  = 24
		requests = 480
		// targetTimeout cuts a stalled plain answer (and a stream stalled
		// before its first useful output); idleTimeout cuts a stream that
		// stalls after its commit.
		targetTimeout = 800 * time.Millisecond
		// It is well above the upstreams' 5 ms pace, so that only a
		// stall, not a busy machine, runs into it.
		idleTimeout = 1500 * time.Millisecond
		maxAttempts = 4
		// retryDelay is the router's default pause before a same-target
		// retry after a connection reset.
		retryDelay = 2 * time.Second
		// bound is the longest a request may take with these settings; the
		// slack covers the upstreams' added latency and scheduling on a
		// loaded machine. The client gives up a little later, so that a
		// request over the bound is seen as such.
		bound    = maxAttempts*(targetTimeout+retryDelay) + idleTimeout + 2*time.Second
		deadline = bound + 5*time.Second
	)
	ids := make([]string, len(chaosUpstreams))
	for i, cu := range chaosUpstreams {
		ids[i] = cu.id
	}
	up := upstreams(t, ids...)
	want := map[string]string{} // target → the text of its answers
	var providers []gw.Provider
	var targets []gw.Target
	for _, cu := range chaosUpstreams {
		u := up[cu.id]
		u.SetLogSize(100_000) // every call, for the comparison with the seed's sequence
		words := []string{cu.id, " says", " hi"}
		want[cu.id+"/m"] = strings.Join(words, "")
		u.Handle("", func(c combotest.Call) combotest.Reply {
			var req struct {
				Stream bool `json:"stream"`
			}
			_ = json.Unmarshal(c.Body, &req)
			if req.Stream {
				return combotest.TextStream(5*time.Millisecond, words...)
			}
			return combotest.OK(strings.Join(words, ""))
		})
		u.Chaos(cu.chaos)
		providers = append(providers, provider(cu.id, u, cu.id+"-1"))
		targets = append(targets, gw.Target{Provider: cu.id, Model: "m"})
	}
	settings := gw.ComboSettings{MaxAttempts: maxAttempts, TargetTimeoutMs: int(targetTimeout / time.Millisecond)}
	cfg := config(providers,
		gw.Combo{Name: "chaos", Strategy: "priority", Settings: settings, Targets: targets},
		gw.Combo{Name: "rotate", Strategy: "round-robin", Settings: settings, Targets: targets},
		gw.Combo{Name: "solo", Strategy: "priority", Settings: settings, Targets: targets[:1]})
	cfg.Resilience.ThroughputWatchdog.IdleTimeoutMs = int(idleTimeout / time.Millisecond)
	// Short connection cooldowns (a 429's Retry-After included), so that
	// a failed connection is soon tried again and most requests reach an
	// upstream. The breakers keep their defaults: with one connection per
	// provider and the default 5 s deduplication of its failures, none
	// opens within the test.
	cfg.Resilience.Cooldown = gw.CooldownConfig{APIKey: gw.CooldownProfile{BaseMs: 50, Steps: 1, MaxMs: 200}, MaxHintMs: 500}
	g := startGateway(t, cfg)

	tr := &http.Transport{MaxIdleConnsPerHost: workers}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	models := []string{"chaos", "rotate", "solo"}

	var (
		next   atomic.Int64
		mu     sync.Mutex
		kinds  = map[string]int{}
		broken int
		bad    []string
		walls  []time.Duration
	)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= requests {
					return
				}
				model, streamed := models[i%len(models)], i%3 != 1
				start := time.Now()
				kind, err := chaosAnswer(hc, g.base, model, streamed, deadline, want)
				wall := time.Since(start)
				mu.Lock()
				walls = append(walls, wall)
				switch {
				case err != nil:
					bad = append(bad, fmt.Sprintf("request %d (%s, stream %v) after %v: %v", i, model, streamed, wall, err))
				case wall > bound:
					bad = append(bad, fmt.Sprintf("request %d (%s, stream %v) took %v, over the bound %v: %s", i, model, streamed, wall, bound, kind))
				}
				if err == nil {
					kinds[kind]++
					if strings.HasPrefix(kind, "200 stream broken") {
						broken++
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()

	slices.Sort(walls)
	var counts []string
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		counts = append(counts, fmt.Sprintf("%s: %d", k, kinds[k]))
	}
	t.Logf("chaos: %d requests, wall p50 %v, max %v (bound %v); answers: %s", requests,
		walls[len(walls)/2].Round(time.Millisecond), walls[len(walls)-1].Round(time.Millisecond), bound, strings.Join(counts, ", "))
	for i, e := range bad {
		if i == 10 {
			t.Errorf("... and %d more", len(bad)-10)
			break
		}
		t.Error(e)
	}

	// What the upstreams injected, and that it is the sequence of their
	// seeds.
	var total combotest.Faults
	streamStalls := 0
	for _, cu := range chaosUpstreams {
		u := up[cu.id]
		calls := u.Calls()
		require.Len(t, calls, u.Total(), "%s: the log holds every call", cu.id)
		f := u.Faults()
		t.Logf("chaos: %s (seed %d): %d calls; faults %+v", cu.id, cu.chaos.Seed, len(calls), f)
		assert.Equal(t, cu.chaos.Draws(len(calls)), combotest.DrawsOf(calls),
			"%s: the faults and latencies of its calls, in order, are those of seed %d", cu.id, cu.chaos.Seed)
		other := cu.chaos
		other.Seed++
		assert.NotEqual(t, other.Draws(len(calls)), combotest.DrawsOf(calls), "%s: another seed gives another sequence", cu.id)
		for _, c := range calls {
			if c.Fault == combotest.FaultStall && strings.Contains(string(c.Body), `"stream":true`) {
				streamStalls++
			}
		}
		total.ServerError += f.ServerError
		total.RateLimit += f.RateLimit
		total.Reset += f.Reset
		total.Stall += f.Stall
		total.Delayed += f.Delayed
	}
	assert.Positive(t, total.ServerError, "503s injected")
	assert.Positive(t, total.RateLimit, "429s injected")
	assert.Positive(t, total.Reset, "resets injected")
	assert.Positive(t, total.Stall, "stalls injected")
	assert.Positive(t, total.Delayed, "latency added")
	assert.LessOrEqual(t, broken, streamStalls, "broken streams, against the streamed calls that stalled")

	// The mix reached every kind of answer that matters.
	var plainOK, streamOK, failures int
	for k, n := range kinds {
		switch {
		case strings.HasPrefix(k, "200 json "):
			plainOK += n
		case strings.HasPrefix(k, "200 stream complete "):
			streamOK += n
		case !strings.HasPrefix(k, "200 "):
			failures += n
		}
	}
	assert.Positive(t, plainOK, "plain successes")
	assert.Positive(t, streamOK, "complete streams")
	assert.Positive(t, failures, "error answers")
}

// chaosAnswer sends one chat request for model and checks that its answer
// is truthful (see TestE2EChaosSeededUpstreams). It returns the answer's
// kind, such as "200 json alpha/m", "200 stream complete beta/m", "200
// stream broken alpha/m" or "503 all_targets_cooling_down".
func chaosAnswer(hc *http.Client, base, model string, streamed bool, deadline time.Duration, want map[string]string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions",
		strings.NewReader(chatBody(model, "hi", streamed)))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, readErr := io.ReadAll(resp.Body)
	ct := resp.Header.Get("Content-Type")
	target := resp.Header.Get("X-Routeguard-Target")
	if resp.StatusCode == http.StatusOK {
		text, ok := want[target]
		if !ok {
			return "", fmt.Errorf("200 from unknown target %q", target)
		}
		if !streamed {
			if readErr != nil {
				return "", fmt.Errorf("200 whose body broke off: %v: %q", readErr, body)
			}
			var c struct {
				Object  string `json:"object"`
				Choices []struct {
					Message struct {
						Content string `json:"content"`
					} `json:"message"`
				} `json:"choices"`
			}
			if !strings.HasPrefix(ct, "application/json") || json.Unmarshal(body, &c) != nil ||
				c.Object != "chat.completion" || len(c.Choices) != 1 || c.Choices[0].Message.Content != text {
				return "", fmt.Errorf("200 with Content-Type %q is not %s's whole answer: %q", ct, target, body)
			}
			return "200 json " + target, nil
		}
		if !strings.HasPrefix(ct, "text/event-stream") {
			return "", fmt.Errorf("stream with Content-Type %q: %q", ct, body)
		}
		if readErr != nil {
			// Broken after its commit: the client must see the cut, and
			// what arrived must not pass for a whole stream.
			if strings.Contains(string(body), "data: [DONE]") || !errors.Is(readErr, io.ErrUnexpectedEOF) {
				return "", fmt.Errorf("a stream broken with %v, not an aborted chunked body: %q", readErr, body)
			}
			return fmt.Sprintf("200 stream broken %s after %d chunks", target, strings.Count(string(body), "chat.completion.chunk")), nil
		}
		if err := soakStream(body); err != nil {
			return "", fmt.Errorf("a stream that ended without an error is not complete: %w: %q", err, body)
		}
		if got := sseText(body); got != text {
			return "", fmt.Errorf("stream text %q, %s answers %q", got, target, text)
		}
		return "200 stream complete " + target, nil
	}
	if readErr != nil {
		return "", fmt.Errorf("status %d: reading the body: %w", resp.StatusCode, readErr)
	}
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
	default:
		return "", fmt.Errorf("undocumented status %d: %q", resp.StatusCode, body)
	}
	var e struct {
		Error struct {
			Message string          `json:"message"`
			Code    json.RawMessage `json:"code"`
		} `json:"error"`
	}
	if !strings.HasPrefix(ct, "application/json") || json.Unmarshal(body, &e) != nil || e.Error.Message == "" ||
		len(e.Error.Code) == 0 || string(e.Error.Code) == "null" {
		return "", fmt.Errorf("%d with Content-Type %q is not an OpenAI-style error: %q", resp.StatusCode, ct, body)
	}
	code := string(e.Error.Code)
	if s, err := strconv.Unquote(code); err == nil {
		code = s
	}
	ra := resp.Header.Values("Retry-After")
	switch {
	case len(ra) > 1:
		return "", fmt.Errorf("%d %s with %d Retry-After headers %q", resp.StatusCode, code, len(ra), ra)
	case len(ra) == 1:
		n, err := strconv.Atoi(ra[0])
		if err != nil || n < 1 || n > 86400 || strconv.Itoa(n) != ra[0] {
			return "", fmt.Errorf("%d %s with Retry-After %q, not an integer in 1..86400", resp.StatusCode, code, ra[0])
		}
	case resp.StatusCode == http.StatusTooManyRequests, code == "all_targets_cooling_down":
		return "", fmt.Errorf("%d %s without Retry-After: %q", resp.StatusCode, code, body)
	}
	return strconv.Itoa(resp.StatusCode) + " " + code, nil
}

// sseText joins the content deltas of a chat completions event stream.
func sseText(body []byte) string {
	var sb strings.Builder
	for line := range strings.Lines(string(body)) {
		data, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		_ = json.Unmarshal([]byte(data), &c)
		for _, ch := range c.Choices {
			sb.WriteString(ch.Delta.Content)
		}
	}
	return sb.String()
}
