package combo_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/watchdog"
)

// cutBody gives data, then fails with err (io.EOF for a body that simply
// ends, short of what its Content-Length declared).
type cutBody struct {
	data string
	err  error
}

func (b *cutBody) Read(p []byte) (int, error) {
	if b.data == "" {
		return 0, b.err
	}
	n := copy(p, b.data)
	b.data = b.data[n:]
	return n, nil
}

func (b *cutBody) Close() error { return nil }

// cutAnswer is a 200 answer that declares declared bytes and sends data
// before failing with err.
func cutAnswer(contentType string, declared int64, data string, err error) *http.Response {
	h := http.Header{"Content-Type": {contentType}}
	if declared >= 0 {
		h.Set("Content-Length", strconv.FormatInt(declared, 10))
	}
	return &http.Response{StatusCode: 200, Header: h, ContentLength: declared, Body: &cutBody{data: data, err: err}}
}

// The body cases of a plain answer that breaks off before its end.
var cutCases = []struct {
	name     string
	declared int64
	err      error
	is       error
}{
	{"ends before its Content-Length", 100, io.EOF, io.ErrUnexpectedEOF},
	{"read fails with io.ErrUnexpectedEOF", 100, io.ErrUnexpectedEOF, io.ErrUnexpectedEOF},
	{"connection reset mid-body, length unknown", -1, combotest.ErrReset, syscall.ECONNRESET},
}

// A truncated answer is a failure, never a success: a plain answer whose
// body breaks off is read before commit, so the request falls back to the
// next target and the caller gets that target's whole answer, with a
// correct Content-Length. The cut is a transport-class failure of the one
// model (502, its exact model locked), not of the connection, which is not
// cooled.
func TestTruncatedAnswerFallsBackToNextTarget(t *testing.T) {
	for _, tt := range cutCases {
		t.Run(tt.name, func(t *testing.T) {
			f := newFleet(t, "short", "openai")
			f.up["openai"].Script("", combotest.OK("the whole answer"))
			send := func(ctx context.Context, tg *combo.Target) (*http.Response, error) {
				if tg.Provider == "short" {
					return cutAnswer("application/json", tt.declared, `{"choices":[{"mess`, tt.err), nil
				}
				return f.send(ctx, tg)
			}
			c := &combo.Combo{Name: "c", Targets: []combo.Target{target("short", "s1", "m"), target("openai", "k1", "m")}}

			res, err := f.router.Do(context.Background(), combo.Request{Combo: c}, send)
			require.NoError(t, err)
			body, rerr := io.ReadAll(res.Response.Body)
			require.NoError(t, res.Response.Body.Close())
			require.NoError(t, rerr)
			assert.Equal(t, "openai", res.Target.Provider, "the cut answer was not committed")
			assert.Contains(t, string(body), "the whole answer")
			assert.Equal(t, int64(len(body)), res.Response.ContentLength)
			if cl := res.Response.Header.Get("Content-Length"); cl != "" {
				assert.Equal(t, strconv.Itoa(len(body)), cl)
			}
			require.Len(t, res.Attempts, 2)
			a := res.Attempts[0]
			assert.Equal(t, combo.OutcomeFailed, a.Outcome)
			assert.Equal(t, http.StatusBadGateway, a.Status)
			assert.ErrorIs(t, a.Err, tt.is)
			now := time.Now()
			assert.Equal(t, cooldown.Available, f.cfg.Cooldowns.StatusAt("s1", now).State, "the connection is not cooled")
			_, _, locked := f.cfg.Lockouts.LockedAt("short", "s1", "m", now)
			assert.True(t, locked, "the exact model is locked")
		})
	}
}

// With a single target, a truncated answer ends the request with an error:
// never a 200 with a short body, neither from Do nor through Transport.
func TestTruncatedAnswerOfSingleTargetIsAnError(t *testing.T) {
	for _, tt := range cutCases {
		t.Run(tt.name, func(t *testing.T) {
			f := newFleet(t, "short")
			c := &combo.Combo{Name: "c", Targets: []combo.Target{target("short", "s1", "m")}}
			send := func(context.Context, *combo.Target) (*http.Response, error) {
				return cutAnswer("application/json", tt.declared, `{"choices":[{"mess`, tt.err), nil
			}
			res, err := f.router.Do(context.Background(), combo.Request{Combo: c}, send)
			require.Error(t, err)
			assert.Nil(t, res.Response)
			var ue *combo.Error
			require.ErrorAs(t, err, &ue)
			assert.Equal(t, combo.CodeUpstream, ue.Code)
			assert.Equal(t, http.StatusBadGateway, ue.Status)
			assert.Nil(t, ue.Header, "no upstream answer to pass on")
			assert.ErrorIs(t, err, tt.is)

			f.cfg.Lockouts.Clear("short", "s1", "m")
			tr := &combo.Transport{
				Router:  f.router,
				Combo:   func(*http.Request) (*combo.Combo, error) { return c, nil },
				Rewrite: func(req *http.Request, _ *combo.Target) (*http.Request, error) { return req, nil },
				Base: roundTripperFunc(func(*http.Request) (*http.Response, error) {
					return cutAnswer("application/json", tt.declared, `{"choices":[{"mess`, tt.err), nil
				}),
			}
			req, _ := http.NewRequest(http.MethodPost, "http://gw/v1/chat/completions", strings.NewReader(`{}`))
			resp, err := tr.RoundTrip(req)
			assert.Nil(t, resp, "no short 200 reaches the caller")
			assert.ErrorIs(t, err, tt.is)
		})
	}
}

// A plain answer over Config.MaxBodyBytes ends the request with a 502
// matching ErrBodyTooLarge, without a fallback and without telling the
// layers anything.
func TestAnswerOverMaxBodyBytesIsRefused(t *testing.T) {
	f := newFleet(t, "big", "openai")
	f.cfg.MaxBodyBytes = 64 << 10
	f.rebuild()
	f.up["big"].Script("", combotest.Reply{Status: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: strings.Repeat("x", 64<<10+1)})
	c := &combo.Combo{Name: "c", Targets: []combo.Target{target("big", "b1", "m"), target("openai", "k1", "m")}}
	res, err := f.do(t, c)
	require.ErrorIs(t, err, combo.ErrBodyTooLarge)
	var ue *combo.Error
	require.ErrorAs(t, err, &ue)
	assert.Equal(t, http.StatusBadGateway, ue.Status)
	assert.Equal(t, "body_too_large", ue.Reason)
	assert.Zero(t, f.up["openai"].Total(), "no fallback")
	require.Len(t, res.Attempts, 1)
	now := time.Now()
	_, _, locked := f.cfg.Lockouts.LockedAt("big", "b1", "m", now)
	assert.False(t, locked, "nothing learned")
	assert.Equal(t, cooldown.Available, f.cfg.Cooldowns.StatusAt("b1", now).State)

	// Exactly the limit is served.
	f.up["big"].Script("", combotest.Reply{Status: 200, Body: strings.Repeat("x", 64<<10)})
	res, err = f.do(t, c)
	require.NoError(t, err)
	assert.Equal(t, int64(64<<10), res.Response.ContentLength)
}

// Through Transport, a stream that breaks off after its commit makes the
// caller's Read fail with io.ErrUnexpectedEOF, never end with io.EOF.
func TestTransportTruncatedStreamReadFails(t *testing.T) {
	first := combotest.ChatDelta("hello").Encode()
	for _, tt := range []struct {
		name     string
		declared int64
		err      error
	}{
		{"ends before its Content-Length", int64(len(first)) + 200, io.EOF},
		{"read fails with io.ErrUnexpectedEOF", -1, io.ErrUnexpectedEOF},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFleet(t, "openai")
			c := &combo.Combo{Name: "c", Targets: []combo.Target{target("openai", "k1", "m")}}
			tr := &combo.Transport{
				Router:  f.router,
				Combo:   func(*http.Request) (*combo.Combo, error) { return c, nil },
				Rewrite: func(req *http.Request, _ *combo.Target) (*http.Request, error) { return req, nil },
				Base: roundTripperFunc(func(*http.Request) (*http.Response, error) {
					return cutAnswer("text/event-stream", tt.declared, first, tt.err), nil
				}),
			}
			req, _ := http.NewRequest(http.MethodPost, "http://gw/v1/chat/completions", strings.NewReader(`{}`))
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err, "the stream was committed at its first text")
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			assert.Equal(t, first, string(got), "every byte received is handed on")
			assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
		})
	}
}

// A hung upstream costs exactly the per-target timeout per attempt, also
// with cooldown waiting on (the default): the per-target timeout does not
// grow by the cooldown-wait budget.
func TestHungUpstreamCostsTargetTimeoutPerAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "a", "b")
		f.up["a"].Script("", combotest.Hang())
		f.up["b"].Script("", combotest.Hang())
		c := &combo.Combo{Name: "c", Targets: []combo.Target{target("a", "a1", "m"), target("b", "b1", "m")}}
		require.True(t, c.Settings.Normalize().CooldownWait.Enabled())

		start := time.Now()
		res, err := f.do(t, c)
		var ue *combo.Error
		require.ErrorAs(t, err, &ue)
		assert.Equal(t, http.StatusGatewayTimeout, ue.Status)
		assert.Equal(t, 240*time.Second, time.Since(start), "two attempts of 120 s")
		require.Len(t, res.Attempts, 2)
		for _, a := range res.Attempts {
			assert.Equal(t, 120*time.Second, a.Duration)
			assert.Equal(t, http.StatusGatewayTimeout, a.Status)
		}
	})
}

// The request's deadline bounds the whole request: attempts, fallbacks and
// the reading of the answer. The attempt it cuts teaches the built-in layers
// nothing, and the answer is a 504 matching ErrRequestTimeout.
func TestRequestTimeoutBoundsTheWholeRequest(t *testing.T) {
	t.Run("hung upstreams", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFleet(t, "a", "b", "c")
			for _, u := range f.up {
				u.Script("", combotest.Hang())
			}
			c := &combo.Combo{Name: "c", Settings: combo.Settings{RequestTimeout: 200 * time.Second},
				Targets: []combo.Target{target("a", "a1", "m"), target("b", "b1", "m"), target("c", "c1", "m")}}

			start := time.Now()
			res, err := f.do(t, c)
			assert.Equal(t, 200*time.Second, time.Since(start))
			require.ErrorIs(t, err, combo.ErrRequestTimeout)
			var ue *combo.Error
			require.ErrorAs(t, err, &ue)
			assert.Equal(t, combo.CodeUpstream, ue.Code)
			assert.Equal(t, http.StatusGatewayTimeout, ue.Status)
			assert.Equal(t, "request_timeout", ue.Reason)
			require.Len(t, res.Attempts, 2)
			assert.Equal(t, 120*time.Second, res.Attempts[0].Duration)
			assert.Equal(t, 80*time.Second, res.Attempts[1].Duration, "cut by the deadline, not by its own timeout")
			assert.ErrorIs(t, res.Attempts[1].Err, combo.ErrRequestTimeout)
			assert.Zero(t, f.up["c"].Total(), "no attempt after the deadline")
			_, _, locked := f.cfg.Lockouts.LockedAt("b", "b1", "m", time.Now())
			assert.False(t, locked, "the cut attempt teaches the layers nothing")
		})
	})
	t.Run("default 10 min", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFleet(t, "a")
			f.up["a"].Script("", combotest.Hang())
			var targets []combo.Target
			for i := range 10 {
				targets = append(targets, target("a", "a"+strconv.Itoa(i), "m"))
			}
			c := &combo.Combo{Name: "c", Settings: combo.Settings{TargetTimeout: 100 * time.Second}, Targets: targets}
			start := time.Now()
			_, err := f.do(t, c)
			require.ErrorIs(t, err, combo.ErrRequestTimeout)
			assert.Equal(t, 10*time.Minute, time.Since(start))
		})
	})
	t.Run("a committed stream", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFleet(t, "a")
			f.up["a"].Script("", combotest.Reply{Status: 200, Stream: &combotest.Stream{
				Events: []combotest.Event{combotest.ChatDelta("hi")}, HangAfter: true}})
			c := &combo.Combo{Name: "c", Settings: combo.Settings{RequestTimeout: 30 * time.Second},
				Targets: []combo.Target{target("a", "a1", "m")}}
			start := time.Now()
			res, err := f.router.Do(context.Background(), combo.Request{Combo: c}, f.send)
			require.NoError(t, err)
			defer res.Response.Body.Close()
			got, err := io.ReadAll(res.Response.Body)
			assert.Equal(t, combotest.ChatDelta("hi").Encode(), string(got))
			assert.ErrorIs(t, err, combo.ErrRequestTimeout)
			assert.Equal(t, 30*time.Second, time.Since(start))
		})
	})
}

// A cooldown wait that would reach the request's deadline is not made: the
// answer comes at once.
func TestCooldownWaitNeverPassesTheRequestDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFleet(t, "openai")
		f.cfg.Cooldowns = nil // the model lockout alone holds the target
		f.rebuild()
		f.up["openai"].Script("k1", combotest.RateLimited(40*time.Second), combotest.OK("after the wait"))
		c := &combo.Combo{Name: "c", Targets: []combo.Target{target("openai", "k1", "m")}}

		c.Settings.RequestTimeout = 30 * time.Second
		start := time.Now()
		_, err := f.do(t, c)
		var ue *combo.Error
		require.ErrorAs(t, err, &ue)
		assert.Equal(t, http.StatusTooManyRequests, ue.Status)
		assert.Zero(t, time.Since(start), "no wait past the deadline")
		assert.Equal(t, 1, f.up["openai"].Total())

		// With room before the deadline the same lockout is waited out.
		f.cfg.Lockouts.Clear("openai", "k1", "m")
		f.up["openai"].Script("k1", combotest.RateLimited(40*time.Second), combotest.OK("after the wait"))
		c.Settings.RequestTimeout = 0
		start = time.Now()
		res, err := f.do(t, c)
		require.NoError(t, err)
		assert.Equal(t, "openai", res.Target.Provider)
		assert.Equal(t, 40*time.Second+50*time.Millisecond, time.Since(start))
	})
}

// A stream that sends bytes without useful output is never committed on
// bytes alone: an endless line (no newline at all) or endless events that
// carry nothing are a bad stream past the hold bound, and the request
// moves on; a slow endless line is cut by the readiness timeout.
func TestEndlessStreamWithoutOutputIsCut(t *testing.T) {
	line := combotest.Event{Raw: strings.Repeat("x", 4096)}
	meta := combotest.Event{Raw: `data: {"choices":[{"delta":{"role":"assistant"}}],"pad":"` +
		strings.Repeat("p", 8000) + "\"}\n\n"}
	repeat := func(e combotest.Event, n int) []combotest.Event {
		out := make([]combotest.Event, n)
		for i := range out {
			out[i] = e
		}
		return out
	}
	for _, tt := range []struct {
		name    string
		stream  *combotest.Stream
		elapsed time.Duration
		status  int
		is      error
	}{
		// 257 chunks of 4 KiB pass the 1 MiB event bound; chunk k arrives
		// at (k-1)·10 ms.
		{"endless line", &combotest.Stream{Events: repeat(line, 400), Pace: 10 * time.Millisecond, HangAfter: true},
			2560 * time.Millisecond, http.StatusBadGateway, nil},
		// 4 MiB of complete events without output: 4·1 MiB / len(meta).
		{"endless empty events", &combotest.Stream{Events: repeat(meta, 700), Pace: 10 * time.Millisecond, HangAfter: true},
			time.Duration((4<<20)/len(meta.Raw)) * 10 * time.Millisecond, http.StatusBadGateway, nil},
		{"slow endless line", &combotest.Stream{Events: repeat(combotest.Event{Raw: "x"}, 1000), Pace: time.Second, HangAfter: true},
			120 * time.Second, http.StatusGatewayTimeout, watchdog.ErrReadinessTimeout},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFleet(t, "slow", "fast")
				f.up["slow"].Script("", combotest.Reply{Status: 200, Stream: tt.stream})
				f.up["fast"].Script("", combotest.TextStream(0, "hi"))
				c := &combo.Combo{Name: "s", Settings: combo.Settings{TargetTimeout: time.Hour},
					Targets: []combo.Target{target("slow", "s1", "m"), target("fast", "f1", "m")}}

				start := time.Now()
				res, err := f.router.Do(context.Background(), combo.Request{Combo: c}, f.send)
				require.NoError(t, err)
				got, _ := io.ReadAll(res.Response.Body)
				res.Response.Body.Close()
				assert.Equal(t, "fast", res.Target.Provider)
				assert.NotContains(t, string(got), "xxxx", "nothing of the bad stream reached the caller")
				assert.Equal(t, tt.elapsed, time.Since(start))
				require.Len(t, res.Attempts, 2)
				a := res.Attempts[0]
				assert.Equal(t, combo.OutcomeFailed, a.Outcome)
				assert.Equal(t, tt.status, a.Status)
				if tt.is != nil {
					assert.ErrorIs(t, a.Err, tt.is)
				} else {
					assert.ErrorContains(t, a.Err, "no useful output")
				}
				_, _, locked := f.cfg.Lockouts.LockedAt("slow", "s1", "m", time.Now())
				assert.True(t, locked, "a bad stream locks the exact model")
			})
		})
	}
}

// Transport removes routeguard's control headers (lease owner and
// generation, session ids) from every request it sends upstream, unless
// KeepControlHeaders is set; Prepare still sees them on the caller's
// request.
func TestTransportStripsControlHeaders(t *testing.T) {
	control := []string{lease.HeaderOwner, lease.HeaderGeneration, "X-Session-Id", "X-Codex-Session-Id", "X-Omniroute-Session"}
	for _, keep := range []bool{false, true} {
		t.Run("keep="+strconv.FormatBool(keep), func(t *testing.T) {
			up := combotest.New()
			t.Cleanup(up.Close)
			up.Script("", combotest.Error(503, "down"), combotest.OK("ok"))
			r := combo.New(combo.Config{})
			c := &combo.Combo{Name: "c", Targets: []combo.Target{target("a", "a1", "m"), target("b", "b1", "m")}}
			var prepared http.Header
			tr := &combo.Transport{
				Router:  r,
				Combo:   func(*http.Request) (*combo.Combo, error) { return c, nil },
				Prepare: func(req *http.Request, _ *combo.Request) { prepared = req.Header.Clone() },
				Rewrite: func(req *http.Request, tg *combo.Target) (*http.Request, error) {
					req.Header.Set("Authorization", "Bearer "+tg.Connection)
					return req, nil
				},
				Base:               up.Transport(),
				KeepControlHeaders: keep,
			}
			req, _ := http.NewRequest(http.MethodPost, "http://gw/v1/chat/completions", strings.NewReader(`{}`))
			for _, h := range control {
				req.Header.Set(h, "secret")
			}
			req.Header.Set("X-Other", "kept")
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, 200, resp.StatusCode)
			calls := up.Calls()
			require.Len(t, calls, 2, "the fallback is stripped too")
			for _, call := range calls {
				assert.Equal(t, "kept", call.Header.Get("X-Other"))
				for _, h := range control {
					if keep {
						assert.Equal(t, "secret", call.Header.Get(h), h)
					} else {
						assert.Empty(t, call.Header.Values(h), h)
					}
				}
			}
			for _, h := range control {
				assert.Equal(t, "secret", prepared.Get(h), "Prepare sees %s", h)
				assert.Equal(t, "secret", req.Header.Get(h), "the caller's request is not modified")
			}
		})
	}
}

// Transport's Combo and Prepare callbacks can read the caller's body (to
// find the model, for example), each from its start, and the upstream
// still gets it whole.
func TestTransportCallbacksReadTheBody(t *testing.T) {
	up := combotest.New()
	t.Cleanup(up.Close)
	r := combo.New(combo.Config{})
	combos := map[string]*combo.Combo{"smart": {Name: "smart", Targets: []combo.Target{target("a", "a1", "m")}}}
	model := func(req *http.Request) string {
		var b struct{ Model string }
		_ = json.NewDecoder(req.Body).Decode(&b)
		return b.Model
	}
	var prepared, again string
	tr := &combo.Transport{
		Router: r,
		Combo: func(req *http.Request) (*combo.Combo, error) {
			c, ok := combos[model(req)]
			if !ok {
				return nil, errors.New("unknown model")
			}
			return c, nil
		},
		Prepare: func(req *http.Request, _ *combo.Request) {
			prepared = model(req)
			body, err := req.GetBody()
			require.NoError(t, err)
			b, _ := io.ReadAll(body)
			again = string(b)
		},
		Rewrite: func(req *http.Request, _ *combo.Target) (*http.Request, error) { return req, nil },
		Base:    up.Transport(),
	}
	const body = `{"model":"smart","messages":[]}`
	req, _ := http.NewRequest(http.MethodPost, "http://gw/v1/chat/completions", strings.NewReader(body))
	resp, err := tr.RoundTrip(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, "smart", prepared)
	assert.Equal(t, body, again)
	calls := up.Calls()
	require.Len(t, calls, 1)
	assert.Equal(t, body, string(calls[0].Body))
}

// Every Retry-After the router gives is a whole number of seconds in
// 1..86 400: an upstream's own value is clamped, one that is not a number
// of seconds is replaced by the router's retry time or removed, and a
// terminal answer's is clamped too.
func TestRetryAfterIsBoundedWholeSeconds(t *testing.T) {
	for _, tt := range []struct {
		name     string
		upstream string
		retry    time.Duration
		want     string
	}{
		{"a whole number is kept", "7", 0, "7"},
		{"0 becomes 1", "0", 0, "1"},
		{"a huge value is clamped to a day", "99999999", 0, "86400"},
		{"a negative value is replaced", "-3", 30 * time.Second, "30"},
		{"an HTTP date is replaced", "Wed, 21 Oct 2015 07:28:00 GMT", 90 * time.Second, "90"},
		{"garbage without a retry time is removed", "soon", 0, ""},
		{"none, the router's time rounded up", "", 1500 * time.Millisecond, "2"},
		{"none, the router's time clamped", "", 48 * time.Hour, "86400"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{"Content-Type": {"application/json"}}
			if tt.upstream != "" {
				h.Set("Retry-After", tt.upstream)
			}
			e := &combo.Error{Code: combo.CodeUpstream, Status: 429, Header: h, Body: []byte(`{}`), RetryAfter: tt.retry}
			resp := e.Response(nil)
			assert.Equal(t, tt.want, resp.Header.Get("Retry-After"))
			assert.Equal(t, tt.upstream, h.Get("Retry-After"), "the error's own header is not modified")
		})
	}
	te := &combo.Error{Code: combo.CodeAllCoolingDown, Status: 503, TerminalReason: combo.TerminalAllCoolingDown,
		RetryAfter: 30 * 24 * time.Hour}
	resp := te.Response(nil)
	assert.Equal(t, "86400", resp.Header.Get("Retry-After"))
	assert.Equal(t, "86400", resp.Header.Get("X-Omniroute-Retry-After-Seconds"))
	assert.Equal(t, int64(86400), combo.TerminalBody(te).RecoveryHint.RetryAfterSeconds)
}

// StreamError renders a committed stream's failure as an SSE error event.
func TestStreamErrorRendersAnErrorEvent(t *testing.T) {
	for _, tt := range []struct {
		err  error
		code string
	}{
		{io.ErrUnexpectedEOF, "stream_truncated"},
		{combo.ErrRequestTimeout, "request_timeout"},
		{&watchdog.Error{Code: watchdog.CodeIdleTimeout}, watchdog.CodeIdleTimeout},
		{errors.New("dial tcp 10.0.0.1:443: connection refused"), "stream_error"},
	} {
		out := string(combo.StreamError(tt.err))
		require.True(t, strings.HasPrefix(out, "event: error\ndata: "), out)
		require.True(t, strings.HasSuffix(out, "}\n\n"), out)
		var b struct {
			Error struct{ Type, Code, Message string }
		}
		require.NoError(t, json.Unmarshal([]byte(strings.TrimSuffix(strings.TrimPrefix(out, "event: error\ndata: "), "\n\n")), &b))
		assert.Equal(t, "upstream_error", b.Error.Type)
		assert.Equal(t, tt.code, b.Error.Code)
		assert.NotContains(t, out, "10.0.0.1", "the error's text is not sent")
		ev, ok := watchdog.FindErrorEvent([]byte(out))
		require.True(t, ok)
		assert.Equal(t, tt.code, ev.Code)
	}
}

// RequestTimeout's default and range.
func TestRequestTimeoutNormalize(t *testing.T) {
	for in, want := range map[time.Duration]time.Duration{
		0: 10 * time.Minute, -time.Second: 10 * time.Minute, time.Millisecond: time.Second,
		time.Hour: time.Hour, 48 * time.Hour: 24 * time.Hour,
	} {
		assert.Equal(t, want, combo.Settings{RequestTimeout: in}.Normalize().RequestTimeout, "%v", in)
	}
	for in, want := range map[int64]int64{0: 32 << 20, -1: 32 << 20, 1: 64 << 10, 2 << 30: 1 << 30, 5 << 20: 5 << 20} {
		assert.Equal(t, want, combo.Config{MaxBodyBytes: in}.Normalize().MaxBodyBytes, "%v", in)
	}
}
