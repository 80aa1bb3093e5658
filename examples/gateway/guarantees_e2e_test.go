package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	adminapi "github.com/routeguard/routeguard/combo/admin"
	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/examples/gateway/gw"
	"github.com/routeguard/routeguard/lease"
	"github.com/routeguard/routeguard/lease/leasetest"
)

// The tests of what the gateway guarantees to a client: its deadlines,
// the headers it forwards, its Retry-After, tenancy and its limits.

// dialGateway opens a raw TCP connection to the gateway, closed when the
// test ends.
func dialGateway(t *testing.T, g *gatewayProc) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(g.base, "http://"), 2*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// closedBy waits up to limit for the peer to close c (a read that ends in
// EOF or a reset), discarding what arrives, and returns how long it took.
func closedBy(t *testing.T, c net.Conn, limit time.Duration) (time.Duration, []byte) {
	t.Helper()
	start := time.Now()
	require.NoError(t, c.SetReadDeadline(start.Add(limit)))
	got, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the gateway kept the connection open for %v", limit)
	}
	return time.Since(start), got
}

// The server cuts what a client could hold forever — a connection that
// sends nothing, headers trickled byte by byte, a trickled body, an idle
// keep-alive — each within its timeout; and a stream that lasts longer
// than all of those timeouts is served to its end.
func TestE2EServerTimeoutsCutSlowClients(t *testing.T) {
	up := upstreams(t, "openai")
	up["openai"].Script("", combotest.TextStream(300*time.Millisecond, "one", " two", " three", " four", " five", " six", " seven"))
	cfg := config([]gw.Provider{provider("openai", up["openai"], "k1")})
	cfg.Server = gw.ServerConfig{ReadHeaderTimeoutMs: 300, ReadTimeoutMs: 900, IdleTimeoutMs: 1500}
	g := startGateway(t, cfg)

	t.Run("silent connection", func(t *testing.T) {
		c := dialGateway(t, g)
		d, got := closedBy(t, c, 3*time.Second)
		assert.Empty(t, got)
		assert.InDelta(t, 300, d.Milliseconds(), 250, "cut after readHeaderTimeoutMs")
	})

	t.Run("slowloris headers", func(t *testing.T) {
		c := dialGateway(t, g)
		_, err := io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n")
		require.NoError(t, err)
		start := time.Now()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { // one header byte every 20 ms, a request that never ends
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				if _, err := c.Write([]byte{"X-Pad: aaaa\r\n"[i%13]}); err != nil {
					return
				}
			}
		})
		_, got := closedBy(t, c, 3*time.Second)
		d := time.Since(start)
		close(stop)
		wg.Wait()
		if len(got) > 0 { // the cut, at most with a last word
			assert.True(t, strings.HasPrefix(string(got), "HTTP/1.1 400 "), "%q", got)
		}
		assert.InDelta(t, 300, d.Milliseconds(), 250, "trickling does not extend readHeaderTimeoutMs")
	})

	t.Run("trickled body", func(t *testing.T) {
		c := dialGateway(t, g)
		body := chatBody("openai/m", "hi", false)
		_, err := io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Length: "+
			strconv.Itoa(len(body))+"\r\n\r\n")
		require.NoError(t, err)
		start := time.Now()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			for i := 0; i < len(body); i++ {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				if _, err := c.Write([]byte{body[i]}); err != nil {
					return
				}
			}
		})
		require.NoError(t, c.SetReadDeadline(time.Now().Add(3*time.Second)))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		d := time.Since(start)
		close(stop)
		wg.Wait()
		assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode, "%s", b)
		assert.Contains(t, string(b), `"request_timeout"`)
		assert.True(t, resp.Close, "the connection is closed after the answer")
		assert.InDelta(t, 900, d.Milliseconds(), 250, "cut after readTimeoutMs")
		assert.Zero(t, up["openai"].Total(), "nothing went upstream")
	})

	t.Run("idle keep-alive", func(t *testing.T) {
		c := dialGateway(t, g)
		_, err := io.WriteString(c, "GET /v1/models HTTP/1.1\r\nHost: gw\r\n\r\n")
		require.NoError(t, err)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.False(t, resp.Close, "kept alive")
		start := time.Now()
		require.NoError(t, c.SetReadDeadline(start.Add(3*time.Second)))
		n, err := br.Read(make([]byte, 1))
		assert.Zero(t, n)
		assert.ErrorIs(t, err, io.EOF, "closed by the gateway, not by our deadline")
		assert.InDelta(t, 1500, time.Since(start).Milliseconds(), 300, "cut after idleTimeoutMs, not the read timeout")
	})

	t.Run("a long stream is not cut", func(t *testing.T) {
		start := time.Now()
		a := g.do(t, http.MethodPost, "/v1/chat/completions", hdr("Content-Type", "application/json"), chatBody("openai/m", "hi", true))
		require.Equal(t, http.StatusOK, a.StatusCode, a.body)
		assert.Contains(t, a.body, "seven")
		assert.Contains(t, a.body, "[DONE]")
		assert.Greater(t, time.Since(start), 1800*time.Millisecond, "longer than every server timeout")
	})
}

// 1,000 connections trickling their headers or their bodies do not stop a
// normal request from being served at once; each of them is cut by the
// server's timeouts. The trickling clients stop themselves.
func TestE2ETricklingConnectionsDoNotStopService(t *testing.T) {
	const conns = 1000
	up := upstreams(t, "openai")
	cfg := config([]gw.Provider{provider("openai", up["openai"], "k1")})
	cfg.Server = gw.ServerConfig{ReadHeaderTimeoutMs: 1500, ReadTimeoutMs: 1500}
	g := startGateway(t, cfg)
	addr := strings.TrimPrefix(g.base, "http://")
	require.True(t, strings.HasPrefix(addr, "127.0.0.1:"), "loopback only")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var opened, cut, failed atomic.Int64
	var wg sync.WaitGroup
	body := chatBody("openai/m", "hi", false)
	for i := range conns {
		wg.Go(func() {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				failed.Add(1)
				return
			}
			defer c.Close()
			prefix := "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n" // odd: headers trickle
			trickle := "X-Pad: aaaa\r\n"
			if i%2 == 0 { // even: the body trickles
				prefix += "Content-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
				trickle = body
			}
			if _, err := io.WriteString(c, prefix); err != nil {
				failed.Add(1)
				return
			}
			opened.Add(1)
			buf := make([]byte, 512)
			for j := 0; ctx.Err() == nil; j++ {
				if _, err := c.Write([]byte{trickle[j%len(trickle)]}); err != nil {
					cut.Add(1) // reset by the gateway
					return
				}
				_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond)) // also the trickle's pace
				n, err := c.Read(buf)
				var ne net.Error
				if n > 0 || (err != nil && !(errors.As(err, &ne) && ne.Timeout())) {
					cut.Add(1) // an answer (408) or the close
					return
				}
			}
		})
	}
	deadline := time.Now().Add(5 * time.Second)
	for opened.Load()+failed.Load() < conns && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	require.EqualValues(t, conns, opened.Load(), "every trickling connection is open (failed: %d)", failed.Load())
	require.Zero(t, cut.Load(), "all are still trickling")

	start := time.Now()
	a := g.chat(t, "openai/m", "a normal request", nil)
	took := time.Since(start)
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Less(t, took, time.Second, "served at once beside %d trickling connections", conns)
	assert.Zero(t, cut.Load(), "the normal request was served while all of them trickled")

	wg.Wait()
	assert.NoError(t, ctx.Err(), "every trickling connection was cut before the test's own deadline")
	assert.EqualValues(t, conns, cut.Load(), "every trickling connection was cut by the gateway")
	assert.Equal(t, 1, up["openai"].Total(), "no trickled request went upstream")
}

// Of the client's headers only Accept and User-Agent go upstream: no
// credential, cookie, forwarding, session or lease header ever arrives;
// the upstream sees the connection's key and the provider's own headers.
func TestE2EClientCredentialsNeverReachUpstream(t *testing.T) {
	up := upstreams(t, "openai")
	p := provider("openai", up["openai"], "k1", "k2")
	p.Headers = map[string]string{"OpenAI-Beta": "assistants=v2"}
	cfg := config([]gw.Provider{p})
	cfg.APIKeys = []gw.APIKey{
		{ID: "plain", Key: "rk-plain-secret"},
		{ID: "managed", Key: "rk-managed-secret", Scopes: []string{adminapi.ScopeLeaseExclusive}, AllowedConnections: []string{"k2"}},
	}
	cfg.Resilience.SessionAffinityTTLMs = 600_000
	g := startGateway(t, cfg)

	secret := func(key string) http.Header {
		return hdr("Authorization", "Bearer "+key,
			"X-Api-Key", "client-x-api-key", "Api-Key", "client-api-key", "Proxy-Authorization", "Basic Y2xpZW50OnNlY3JldA==",
			"Cookie", "session=client-cookie", "Forwarded", "for=203.0.113.7;proto=https", "X-Forwarded-For", "203.0.113.7",
			"X-Forwarded-Host", "client.example", "X-Forwarded-Proto", "https", "X-Real-Ip", "203.0.113.7",
			"X-Session-Id", "client-session", "X-Codex-Session-Id", "client-codex", "X-Omniroute-Session", "client-omni",
			"OpenAI-Organization", "org-client", "Accept", "application/json", "User-Agent", "agent-ua/1.0")
	}
	a := g.chat(t, "openai/m", "hi", secret("rk-plain-secret"))
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	assert.Empty(t, a.Header.Get("X-Routeguard-Connection"), "no connection id to a client")
	assert.Equal(t, "openai/m", a.Header.Get("X-Routeguard-Target"))

	owner := leasetest.Owner('A')
	acq := g.do(t, http.MethodPost, adminapi.LeasePath,
		hdr("Authorization", "Bearer rk-managed-secret", lease.HeaderOwner, owner, "Content-Type", "application/json"),
		`{"action":"acquire","model":"openai/m"}`)
	require.Equal(t, http.StatusOK, acq.StatusCode, acq.body)
	h := secret("rk-managed-secret")
	h.Set(lease.HeaderOwner, owner)
	h.Set(lease.HeaderGeneration, "1")
	a = g.chat(t, "openai/m", "hi", h)
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)

	calls := up["openai"].Calls()
	require.Len(t, calls, 2)
	allowed := map[string]bool{"Accept": true, "User-Agent": true, "Content-Type": true, "Content-Length": true,
		"Accept-Encoding": true, "Authorization": true, "Openai-Beta": true}
	for i, c := range calls {
		for k, vs := range c.Header {
			assert.True(t, allowed[k], "call %d: header %s: %q reached the upstream", i, k, vs)
			for _, v := range vs {
				for _, leak := range []string{"rk-", "client", "203.0.113.7", owner} {
					assert.NotContains(t, v, leak, "call %d: header %s", i, k)
				}
			}
		}
		assert.Equal(t, "assistants=v2", c.Header.Get("OpenAI-Beta"), "the provider's own header")
		assert.Equal(t, "application/json", c.Header.Get("Content-Type"))
		assert.Equal(t, "agent-ua/1.0", c.Header.Get("User-Agent"))
		assert.Equal(t, "application/json", c.Header.Get("Accept"))
	}
	assert.Equal(t, "Bearer sk-k1", calls[0].Header.Get("Authorization"))
	assert.Equal(t, "Bearer sk-k2", calls[1].Header.Get("Authorization"), "the leased connection's key")
}

// Whatever Retry-After an upstream sends, the client receives a whole
// number of seconds in 1..86400 or none: 20 digits become one day, 1.5
// becomes 2, a date becomes the seconds until it, and -5 or NaN never
// pass through.
func TestE2EUpstreamRetryAfterReachesClientBounded(t *testing.T) {
	date := time.Now().Add(2 * time.Minute).UTC().Format(http.TimeFormat)
	cases := []struct {
		upstream string
		want     func(t *testing.T, got string)
	}{
		{"99999999999999999999", func(t *testing.T, got string) { assert.Equal(t, "86400", got) }},
		{"1.5", func(t *testing.T, got string) { assert.Equal(t, "2", got) }},
		{date, func(t *testing.T, got string) {
			n, err := strconv.Atoi(got)
			require.NoError(t, err, "%q", got)
			assert.InDelta(t, 120, n, 5)
		}},
		{"-5", nil},
		{"NaN", nil},
	}
	var providers []gw.Provider
	ups := map[string]*combotest.Upstream{}
	for i, tc := range cases {
		id := "p" + strconv.Itoa(i)
		ups[id] = combotest.New()
		t.Cleanup(ups[id].Close)
		ups[id].Script("", combotest.Error(http.StatusTooManyRequests, "slow down").WithHeader("Retry-After", tc.upstream))
		providers = append(providers, provider(id, ups[id], id+"-k"))
	}
	g := startGateway(t, config(providers))

	for i, tc := range cases {
		t.Run(tc.upstream, func(t *testing.T) {
			for round := range 2 { // the upstream's 429, then the router's 503 while the key cools
				a := g.chat(t, "p"+strconv.Itoa(i)+"/m", "hi", nil)
				require.Contains(t, []int{http.StatusTooManyRequests, http.StatusServiceUnavailable}, a.StatusCode, a.body)
				vs := a.Header.Values("Retry-After")
				require.LessOrEqual(t, len(vs), 1, "%q", vs)
				got := a.Header.Get("Retry-After")
				assert.NotEqual(t, tc.upstream, got, "round %d: the raw value passed through", round)
				if got != "" {
					n, err := strconv.ParseInt(got, 10, 64)
					require.NoError(t, err, "round %d: %q", round, got)
					assert.True(t, n >= 1 && n <= 86400, "round %d: %d", round, n)
					assert.Equal(t, strconv.FormatInt(n, 10), got, "canonical digits")
				}
				if ra := a.Header.Get("X-Omniroute-Retry-After-Seconds"); ra != "" {
					assert.Equal(t, got, ra)
				}
				if round == 0 && tc.want != nil {
					tc.want(t, got)
				}
			}
		})
	}
}

// Two API keys sending the same session id get independent pins: each
// stays on its own connection, and the pins are two.
func TestE2ESameSessionIdDifferentKeysIndependentPins(t *testing.T) {
	up := upstreams(t, "openai")
	cfg := config([]gw.Provider{provider("openai", up["openai"], "k1", "k2", "k3")},
		gw.Combo{Name: "rr", Strategy: "round-robin", Targets: []gw.Target{{Provider: "openai", Model: "m"}}})
	cfg.APIKeys = []gw.APIKey{{ID: "alice", Key: "rk-alice"}, {ID: "bob", Key: "rk-bob"}}
	cfg.Resilience.SessionAffinityTTLMs = 600_000
	g := startGateway(t, cfg)
	as := func(key string) http.Header {
		return hdr("Authorization", "Bearer "+key, "X-Session-Id", "shared-session")
	}

	a := g.chat(t, "rr", "alice 0", as("rk-alice"))
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	alice := servedBy(t, up["openai"])
	a = g.chat(t, "rr", "bob 0", as("rk-bob"))
	require.Equal(t, http.StatusOK, a.StatusCode, a.body)
	bob := servedBy(t, up["openai"])
	require.NotEqual(t, alice, bob, "bob's first turn is not put on alice's pin")

	for i := 1; i <= 3; i++ {
		a = g.chat(t, "rr", "alice "+strconv.Itoa(i), as("rk-alice"))
		require.Equal(t, http.StatusOK, a.StatusCode, a.body)
		assert.Equal(t, alice, servedBy(t, up["openai"]), "alice turn %d", i)
		a = g.chat(t, "rr", "bob "+strconv.Itoa(i), as("rk-bob"))
		require.Equal(t, http.StatusOK, a.StatusCode, a.body)
		assert.Equal(t, bob, servedBy(t, up["openai"]), "bob turn %d", i)
	}
	h := g.admin(t, http.MethodGet, "/api/monitoring/health", "").json(t)
	assert.EqualValues(t, 2, h["sessions"].(map[string]any)["pins"])
}

// A client's terminal answer names its targets as provider/model, never a
// connection id, and tells nothing of another client's lease: a leased
// connection shows as "unavailable" and its timer is not the Retry-After.
func TestE2EClientDiagnosticsShowNoConnectionsOrLeases(t *testing.T) {
	up := upstreams(t, "openai")
	up["openai"].Script("sk-conn-alpha", combotest.RateLimited(30*time.Second))
	cfg := config([]gw.Provider{provider("openai", up["openai"], "conn-alpha", "conn-beta")})
	cfg.APIKeys = []gw.APIKey{
		{ID: "plain", Key: "rk-plain"},
		{ID: "managed", Key: "rk-managed", Scopes: []string{adminapi.ScopeLeaseExclusive}, AllowedConnections: []string{"conn-beta"}},
	}
	cfg.Resilience.LeaseTTLMs = 300_000
	g := startGateway(t, cfg)
	owner := leasetest.Owner('A')
	acq := g.do(t, http.MethodPost, adminapi.LeasePath,
		hdr("Authorization", "Bearer rk-managed", lease.HeaderOwner, owner, "Content-Type", "application/json"),
		`{"action":"acquire","model":"openai/m"}`)
	require.Equal(t, http.StatusOK, acq.StatusCode, acq.body)

	plain := func() http.Header { return hdr("Authorization", "Bearer rk-plain") }
	a := g.chat(t, "openai/m", "hi", plain())
	require.Equal(t, http.StatusTooManyRequests, a.StatusCode, "alpha's 429; beta is leased: %s", a.body)
	a = g.chat(t, "openai/m", "hi", plain())
	require.Equal(t, http.StatusServiceUnavailable, a.StatusCode, a.body)
	assert.Equal(t, "all_targets_cooling_down", errorCode(t, a))
	for _, leak := range []string{"conn-", `"connection"`, "lease", owner} {
		assert.NotContains(t, strings.ToLower(a.body), strings.ToLower(leak), a.body)
	}
	assert.Contains(t, a.body, "openai/m: connection_cooldown")
	assert.Contains(t, a.body, "openai/m: unavailable")
	n, err := strconv.Atoi(a.Header.Get("Retry-After"))
	require.NoError(t, err)
	assert.InDelta(t, 30, n, 2, "alpha's cooldown, not the 300 s lease")
	assert.Equal(t, 1, up["openai"].Total())

	// The admin API still names the connections.
	cd := g.admin(t, http.MethodGet, "/api/resilience/cooldowns", "")
	assert.Contains(t, cd.body, "conn-alpha")
}

// /v1/chat/completions takes JSON only: a form or text body is 415 before
// anything is read or sent; application/json with parameters, and a body
// without Content-Type, are served.
func TestE2EChatRefusesNonJSONBody(t *testing.T) {
	up := upstreams(t, "openai")
	g := startGateway(t, config([]gw.Provider{provider("openai", up["openai"], "k1")}))
	body := chatBody("openai/m", "hi", false)
	for _, tc := range []struct {
		contentType string
		status      int
	}{
		{"application/x-www-form-urlencoded", http.StatusUnsupportedMediaType}, // curl -d without -H
		{"text/plain", http.StatusUnsupportedMediaType},
		{"multipart/form-data; boundary=x", http.StatusUnsupportedMediaType},
		{"application/jsonl", http.StatusUnsupportedMediaType},
		{"application/json", http.StatusOK},
		{"application/json; charset=utf-8", http.StatusOK},
		{"", http.StatusOK},
	} {
		t.Run(tc.contentType, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, g.base+"/v1/chat/completions", strings.NewReader(body))
			require.NoError(t, err)
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			resp, err := testClient(t).Do(req)
			require.NoError(t, err)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			assert.Equal(t, tc.status, resp.StatusCode, "%s", b)
			assert.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json"))
			if tc.status == http.StatusUnsupportedMediaType {
				assert.Contains(t, string(b), `"unsupported_media_type"`)
			}
		})
	}
	assert.Equal(t, 3, up["openai"].Total(), "only the JSON bodies went upstream")
}

// An upstream answer that breaks off after it has started is never passed
// on as a complete one: the client either reads a whole, valid answer or
// sees its connection cut, not a shorter body that ends cleanly.
func TestE2EBrokenOffAnswerIsNotPassedOffAsComplete(t *testing.T) {
	up := upstreams(t, "openai")
	up["openai"].Chaos(combotest.Chaos{Seed: 1, Stall: 1}) // status, headers, half the body, then nothing
	up["openai"].Script("", combotest.OK("a complete answer"))
	cfg := config([]gw.Provider{provider("openai", up["openai"], "k1")},
		gw.Combo{Name: "c", Strategy: "priority", Settings: gw.ComboSettings{TargetTimeoutMs: 500},
			Targets: []gw.Target{{Provider: "openai", Model: "m"}}})
	g := startGateway(t, cfg)

	req, err := http.NewRequest(http.MethodPost, g.base+"/v1/chat/completions", strings.NewReader(chatBody("c", "hi", false)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := testClient(t).Do(req)
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil {
		assert.True(t, json.Valid(b), "status %d: a cut answer ended cleanly: %q", resp.StatusCode, b)
	} else {
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF, "the client sees the cut")
	}
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Equal(t, 1, up["openai"].Faults().Stall)
}

// A chat body over gw.MaxRequestBody is 413 and headers over
// gw.MaxHeaderBytes (net/http allows 4 KiB of slack) are 431; neither
// reaches an upstream.
func TestE2EChatBodyAndHeaderLimits(t *testing.T) {
	up := upstreams(t, "openai")
	g := startGateway(t, config([]gw.Provider{provider("openai", up["openai"], "k1")}))

	big := `{"model":"openai/m","messages":[{"role":"user","content":"` + strings.Repeat("x", gw.MaxRequestBody) + `"}]}`
	a := g.do(t, http.MethodPost, "/v1/chat/completions", hdr("Content-Type", "application/json"), big)
	assert.Equal(t, http.StatusRequestEntityTooLarge, a.StatusCode, a.body)
	assert.Equal(t, "body_too_large", errorCode(t, a))

	a = g.do(t, http.MethodPost, "/v1/chat/completions",
		hdr("Content-Type", "application/json", "X-Big", strings.Repeat("b", gw.MaxHeaderBytes+8<<10)), chatBody("openai/m", "hi", false))
	assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, a.StatusCode)
	assert.Zero(t, up["openai"].Total())

	a = g.chat(t, "openai/m", "hi", nil)
	assert.Equal(t, http.StatusOK, a.StatusCode, a.body)
}
