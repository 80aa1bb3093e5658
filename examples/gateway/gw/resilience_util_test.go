package gw_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/examples/gateway/gw"
)

// The resilience tests run the whole gateway in process: a gw.Server behind
// an httptest server on loopback, in front of combotest upstreams that are
// themselves loopback servers, so every request crosses two real HTTP hops.

const (
	rigAdminToken = "adm-resilience"
	rigModel      = "m"
)

// rig is a gateway on loopback with its fake upstreams and a client.
type rig struct {
	t      *testing.T
	gw     *gw.Server
	srv    *httptest.Server
	tr     *http.Transport
	client *http.Client
	ups    map[string]*combotest.Upstream
	closed bool
}

// provider returns a provider whose connections are named id-1 … id-n and
// whose base URL points at u.
func provider(id string, u *combotest.Upstream, conns int) gw.Provider {
	p := gw.Provider{ID: id, Class: "apikey", BaseURL: u.URL() + "/v1", Models: []string{rigModel}}
	for i := 1; i <= conns; i++ {
		n := id + "-" + string(rune('0'+i))
		p.Connections = append(p.Connections, gw.Connection{ID: n, APIKey: "sk-" + n})
	}
	return p
}

// comboOf is a priority combo over the model of each provider, in order.
func comboOf(name string, targetTimeout time.Duration, providers ...string) gw.Combo {
	c := gw.Combo{Name: name, Strategy: "priority",
		Settings: gw.ComboSettings{TargetTimeoutMs: int(targetTimeout / time.Millisecond)}}
	for _, p := range providers {
		c.Targets = append(c.Targets, gw.Target{Provider: p, Model: rigModel})
	}
	return c
}

// newRig starts the gateway for cfg. ups names the upstreams the config
// points at; the rig closes them, after the gateway, at cleanup.
func newRig(t *testing.T, cfg *gw.Config, ups map[string]*combotest.Upstream) *rig {
	t.Helper()
	cfg.AdminToken = rigAdminToken
	s, err := gw.New(cfg, gw.Options{})
	require.NoError(t, err)
	r := &rig{t: t, gw: s, ups: ups}
	r.srv = httptest.NewServer(s)
	r.tr = &http.Transport{MaxIdleConns: 128, MaxIdleConnsPerHost: 128, IdleConnTimeout: 30 * time.Second}
	r.client = &http.Client{Transport: r.tr}
	t.Cleanup(r.close)
	return r
}

// close stops the client, the gateway and the upstreams, in that order,
// and fails the test if any of them does not stop within a few seconds:
// httptest.Server.Close waits for every running handler, so a handler stuck
// on a hung upstream would show here.
func (r *rig) close() {
	if r.closed {
		return
	}
	r.closed = true
	r.tr.CloseIdleConnections()
	within(r.t, 5*time.Second, "gateway server close", r.srv.Close)
	r.gw.Close()
	for name, u := range r.ups {
		within(r.t, 5*time.Second, "upstream "+name+" close", u.Close)
	}
}

// closeIdle closes the idle keep-alive connections of both hops: client to
// gateway and gateway to upstreams. A connection whose last answer has just
// been read may reach its pool a moment later, so callers that wait for
// connections to go call it repeatedly.
func (r *rig) closeIdle() {
	r.tr.CloseIdleConnections()
	r.gw.Close()
}

// within runs f and reports an error if it takes longer than d.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		t.Errorf("%s did not finish within %v", what, d)
		<-done
	}
}

// result is what one client request saw.
type result struct {
	Status int           // 0 when no answer arrived
	Code   string        // error.code of a JSON error answer, as written
	Target string        // X-Routeguard-Target of a routed answer
	Body   []byte        // the whole body
	Header http.Header   // the answer's headers
	Err    error         // transport or body-read error seen by the client
	Wall   time.Duration // from sending to the end of the body
}

// answered reports whether the request got a complete answer: a 2xx body,
// or an error answer carrying a JSON error with a non-empty code.
func (res result) answered() bool {
	if res.Err != nil || res.Status == 0 {
		return false
	}
	if res.Status >= 200 && res.Status < 300 {
		return true
	}
	return res.Code != ""
}

// chat sends one chat request with its own deadline and reads the whole
// answer.
func (r *rig) chat(model string, stream bool, deadline time.Duration) result {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	body := `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]`
	if stream {
		body += `,"stream":true`
	}
	body += "}"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.srv.URL+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return result{Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	return r.send(req)
}

// health fetches the admin health report with the admin token.
func (r *rig) health(deadline time.Duration) result {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.srv.URL+"/api/monitoring/health", nil)
	if err != nil {
		return result{Err: err}
	}
	req.Header.Set("Authorization", "Bearer "+rigAdminToken)
	return r.send(req)
}

func (r *rig) send(req *http.Request) result {
	start := time.Now()
	resp, err := r.client.Do(req)
	if err != nil {
		return result{Err: err, Wall: time.Since(start)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	res := result{Status: resp.StatusCode, Target: resp.Header.Get("X-Routeguard-Target"), Body: b, Err: err,
		Header: resp.Header, Wall: time.Since(start)}
	if resp.StatusCode >= 400 {
		res.Code = errorCode(b)
	}
	return res
}

// errorCode returns the error.code of a JSON error body ("" if none). A
// numeric code, as some upstreams send, is kept in its JSON form.
func errorCode(b []byte) string {
	var e struct {
		Error struct {
			Code json.RawMessage `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) != nil {
		return ""
	}
	raw := bytes.TrimSpace(e.Error.Code)
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	switch string(raw) {
	case "", "null", "0":
		return ""
	}
	return string(raw)
}

// breakerView is one provider's breaker in the admin health report.
type breakerView struct {
	State         string `json:"state"` // closed, degraded, open or half-open
	ProbeInFlight bool   `json:"probeInFlight"`
}

// breakers returns the breaker of every provider in the admin health
// report.
func (r *rig) breakers() (map[string]breakerView, error) {
	res := r.health(5 * time.Second)
	if res.Err != nil {
		return nil, res.Err
	}
	if res.Status != http.StatusOK {
		return nil, errors.New("health answered " + http.StatusText(res.Status) + ": " + string(res.Body))
	}
	var h struct {
		ProviderBreakers []struct {
			Provider string `json:"provider"`
			breakerView
		} `json:"providerBreakers"`
	}
	if err := json.Unmarshal(res.Body, &h); err != nil {
		return nil, err
	}
	out := make(map[string]breakerView, len(h.ProviderBreakers))
	for _, b := range h.ProviderBreakers {
		out[b.Provider] = b.breakerView
	}
	return out, nil
}

// breakerStates returns the breaker state of every provider in the admin
// health report.
func (r *rig) breakerStates() (map[string]string, error) {
	bs, err := r.breakers()
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(bs))
	for p, b := range bs {
		out[p] = b.State
	}
	return out, nil
}

// waitProbeSlot polls the health report, for at most d, until provider's
// breaker is half-open with no probe out, so that the next request to it
// is the probe. It returns the last view seen.
func (r *rig) waitProbeSlot(provider string, d time.Duration) breakerView {
	end := time.Now().Add(d)
	var last breakerView
	for {
		if bs, err := r.breakers(); err == nil {
			last = bs[provider]
			if last.State == "HALF_OPEN" && !last.ProbeInFlight {
				return last
			}
		}
		if time.Now().After(end) {
			return last
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// streamOrPlain answers in the shape the request asks for: a paced
// chat-completions stream of chunks, or a plain completion of their text.
func streamOrPlain(c combotest.Call, pace time.Duration, chunks ...string) combotest.Reply {
	var req struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(c.Body, &req)
	if req.Stream {
		return combotest.TextStream(pace, chunks...)
	}
	return combotest.OK(strings.Join(chunks, ""))
}

// deltaText joins the content deltas of a chat-completions event stream.
func deltaText(body []byte) string {
	var sb strings.Builder
	for _, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(data), &chunk) != nil {
			return "<bad chunk " + data + ">"
		}
		for _, c := range chunk.Choices {
			sb.WriteString(c.Delta.Content)
		}
	}
	return sb.String()
}

// wholeAnswer reports how a 2xx answer falls short of the whole answer of
// the target it names (texts maps a target to the text its upstream
// sends): a chat completion carrying the text, or an event stream whose
// deltas join to it and whose last event is data: [DONE].
func wholeAnswer(res result, streamed bool, texts map[string]string) error {
	want, ok := texts[res.Target]
	if !ok {
		return fmt.Errorf("a %d from unknown target %q", res.Status, res.Target)
	}
	ct := res.Header.Get("Content-Type")
	if streamed {
		if !strings.HasPrefix(ct, "text/event-stream") || !strings.HasSuffix(string(res.Body), "data: [DONE]\n\n") ||
			deltaText(res.Body) != want {
			return fmt.Errorf("stream from %s with Content-Type %q is not its whole answer %q: %q", res.Target, ct, want, res.Body)
		}
		return nil
	}
	var c struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if !strings.HasPrefix(ct, "application/json") || json.Unmarshal(res.Body, &c) != nil || c.Object != "chat.completion" ||
		len(c.Choices) != 1 || c.Choices[0].Message.Content != want {
		return fmt.Errorf("answer from %s with Content-Type %q is not its whole answer %q: %q", res.Target, ct, want, res.Body)
	}
	return nil
}

// boundedRetryAfter reports what is wrong with an error answer's
// Retry-After: there may be none, or one whole number of seconds in
// 1..86400, and a 429 always has one.
func boundedRetryAfter(res result) error {
	ra := res.Header.Values("Retry-After")
	switch {
	case len(ra) == 0 && res.Status == http.StatusTooManyRequests:
		return fmt.Errorf("a 429 without Retry-After: %q", res.Body)
	case len(ra) > 1:
		return fmt.Errorf("%d Retry-After headers %q", len(ra), ra)
	case len(ra) == 1:
		n, err := strconv.Atoi(ra[0])
		if err != nil || n < 1 || n > 86400 || strconv.Itoa(n) != ra[0] {
			return fmt.Errorf("a %d with Retry-After %q, not a whole number of seconds in 1..86400", res.Status, ra[0])
		}
	}
	return nil
}
