package gw_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/examples/gateway/gw"
)

// A Retry-After told to a client is a whole number of seconds in
// 1..86400 whatever the upstream sent; an unusable hint is left out.
func TestClientRetryAfterIsABoundedPositiveInteger(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want int64 // 0: refused
	}{
		{"7", 7},
		{" 42 ", 42},
		{"0", 1},
		{"1", 1},
		{"86400", 86400},
		{"86401", 86400},
		{"00000000000000000005", 5},
		{"99999999999999999999", 86400}, // 20 digits
		{"18446744073709551616", 86400}, // one over uint64
		{strings.Repeat("9", 400), 86400},
		{"1.5", 2},
		{"0.2", 1},
		{"2.", 2},
		{"100000.5", 86400},
		{strings.Repeat("9", 400) + ".5", 86400},
		{"-5", 0},
		{"-0", 0},
		{"+5", 0},
		{"NaN", 0},
		{"nan", 0},
		{"Inf", 0},
		{"+Inf", 0},
		{"1e3", 0},
		{"0x10", 0},
		{".5", 0},
		{"1.2.3", 0},
		{"5s", 0},
		{"", 0},
		{"   ", 0},
		{"soon", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90},
		{now.Add(1500 * time.Millisecond).Format(http.TimeFormat), 1}, // dates have whole seconds: 12:00:01
		{now.Add(90 * time.Second).Format(time.RFC1123), 0},           // "UTC" is not an HTTP date
		{now.Add(-time.Hour).Format(http.TimeFormat), 1},
		{now.Add(400 * 24 * time.Hour).Format(http.TimeFormat), 86400},
		{"Sun, 06 Nov 1994 08:49:37 GMT", 1},
		{"Sunday, 06-Nov-94 08:49:37 GMT", 1},
		{"Sun Nov  6 08:49:37 1994", 1},
		{"Mon, 32 Feb 2026 25:00:00 GMT", 0},
	} {
		got, ok := gw.ClientRetryAfter(tc.in, now)
		if tc.want == 0 {
			assert.False(t, ok, "%q gave %d", tc.in, got)
			continue
		}
		if assert.True(t, ok, "%q refused", tc.in) {
			assert.Equal(t, tc.want, got, "%q", tc.in)
		}
	}
}

// The server settings: absent means the defaults, a negative value is
// refused with its field path, a positive one is clamped into its range.
func TestServerSettingsRefusedWithTheirPath(t *testing.T) {
	for _, field := range []string{"readHeaderTimeoutMs", "readTimeoutMs", "idleTimeoutMs", "maxConcurrentRequests"} {
		_, err := gw.Parse(edit(t, func(m map[string]any) { m["server"] = map[string]any{field: -1} }))
		var ce *gw.ConfigError
		require.True(t, errors.As(err, &ce), "%s: %v", field, err)
		assert.Equal(t, "server."+field, ce.Field)
		assert.Contains(t, ce.Problem, "must be ≥ 0")
	}
	_, err := gw.Parse(edit(t, func(m map[string]any) { m["server"] = map[string]any{"readTimeout": 5} }))
	assert.EqualError(t, err, "config: server.readTimeout: unknown field")
}

func TestServerSettingsDefaultsAndClamps(t *testing.T) {
	for _, tc := range []struct {
		name               string
		in                 gw.ServerConfig
		header, read, idle time.Duration
	}{
		{"defaults", gw.ServerConfig{}, 10 * time.Second, 30 * time.Second, 60 * time.Second},
		{"values", gw.ServerConfig{ReadHeaderTimeoutMs: 2500, ReadTimeoutMs: 4000, IdleTimeoutMs: 7000},
			2500 * time.Millisecond, 4 * time.Second, 7 * time.Second},
		{"clamped low", gw.ServerConfig{ReadHeaderTimeoutMs: 1, ReadTimeoutMs: 2, IdleTimeoutMs: 5},
			100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond},
		{"clamped high", gw.ServerConfig{ReadHeaderTimeoutMs: 1 << 30, ReadTimeoutMs: 1 << 30, IdleTimeoutMs: 1 << 30},
			5 * time.Minute, 10 * time.Minute, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := combotest.New()
			defer up.Close()
			cfg := &gw.Config{Providers: []gw.Provider{provider("p", up, 1)}, Server: tc.in}
			s, err := gw.New(cfg, gw.Options{})
			require.NoError(t, err)
			defer s.Close()
			hs := s.HTTPServer(nil)
			assert.Equal(t, tc.header, hs.ReadHeaderTimeout)
			assert.Equal(t, tc.idle, hs.IdleTimeout)
			assert.Equal(t, tc.read, hs.ReadTimeout)
			assert.Zero(t, hs.WriteTimeout, "a long stream is never cut for taking long")
			assert.Equal(t, gw.MaxHeaderBytes, hs.MaxHeaderBytes)
		})
	}
}

// Over MaxConcurrentRequests a client request is answered 503
// gateway_overloaded with Retry-After 1 and reaches no upstream; the
// admin API is not counted; a finished request frees its slot.
func TestConcurrencyCapAnswers503(t *testing.T) {
	up := combotest.New()
	defer up.Close()
	release := make(chan struct{})
	done := sync.OnceFunc(func() { close(release) })
	defer done()
	up.Handle("", func(c combotest.Call) combotest.Reply {
		<-release
		return combotest.OK("done")
	})
	cfg := &gw.Config{Providers: []gw.Provider{provider("p", up, 1)}, Server: gw.ServerConfig{MaxConcurrentRequests: 2}}
	cfg.Resilience.ComboCooldownWait.Disabled = true
	r := newRig(t, cfg, map[string]*combotest.Upstream{"p": up})

	held := make(chan result, 2)
	for range 2 {
		go func() { held <- r.chat("p/m", false, 10*time.Second) }()
	}
	within(t, 5*time.Second, "two requests upstream", func() {
		for up.Total() < 2 {
			time.Sleep(2 * time.Millisecond)
		}
	})
	third := r.chat("p/m", false, 5*time.Second)
	assert.Equal(t, http.StatusServiceUnavailable, third.Status, "%s", third.Body)
	assert.Equal(t, "gateway_overloaded", errorCode(third.Body))
	assert.Equal(t, "1", third.Header.Get("Retry-After"))
	assert.True(t, strings.HasPrefix(third.Header.Get("Content-Type"), "application/json"))
	assert.Equal(t, 2, up.Total(), "the refused request reached no upstream")
	h := r.health(5 * time.Second)
	assert.Equal(t, http.StatusOK, h.Status, "the admin API is not counted")

	done()
	for range 2 {
		res := <-held
		assert.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	}
	again := r.chat("p/m", false, 5*time.Second)
	assert.Equal(t, http.StatusOK, again.Status, "%s", again.Body)
}

// A handler's Retry-After goes through ClientRetryAfter when the answer
// starts, whatever wrote it: the guard sits in front of every route.
func TestEveryRetryAfterIsSanitised(t *testing.T) {
	up := combotest.New()
	defer up.Close()
	for _, tc := range []struct{ upstream, want string }{
		{"99999999999999999999", "86400"},
		{"-5", ""},
		{"NaN", ""},
		{"1.5", "2"},
		{"12", "12"},
	} {
		t.Run(tc.upstream, func(t *testing.T) {
			up.Script("", combotest.OK("fine").WithHeader("Retry-After", tc.upstream))
			cfg := &gw.Config{Providers: []gw.Provider{provider("p", up, 1)}}
			s, err := gw.New(cfg, gw.Options{Upstream: up.Transport()})
			require.NoError(t, err)
			defer s.Close()
			w := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"model":"p/m","messages":[]}`))
			req.Header.Set("Content-Type", "application/json")
			s.ServeHTTP(w, req)
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			assert.Equal(t, tc.want, w.Header().Get("Retry-After"), "a relayed success keeps no raw hint")
		})
	}
}
