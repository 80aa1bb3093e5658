package gw

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/combo"
)

// The upstream header is built from an allowlist: of everything a client
// sends only Accept and User-Agent go on; the provider's headers, the JSON
// content type and the connection's bearer token are the gateway's.
func TestUpstreamHeaderIsAnAllowlist(t *testing.T) {
	client := http.Header{}
	for k, v := range map[string]string{
		"Authorization": "Bearer rk-client", "X-Api-Key": "client-key", "Api-Key": "client-key",
		"Proxy-Authorization": "Basic eA==", "Cookie": "sid=1", "Forwarded": "for=1.2.3.4",
		"X-Forwarded-For": "1.2.3.4", "X-Forwarded-Host": "evil", "X-Forwarded-Proto": "http", "X-Real-Ip": "1.2.3.4",
		"X-Session-Id": "s1", "X-Routeguard-Lease-Owner": "o", "X-Routeguard-Lease-Generation": "1",
		"Openai-Organization": "org-client", "X-Custom": "x", "Content-Type": "application/json; charset=utf-8",
		"Accept": "text/event-stream", "User-Agent": "client/1.0", "Host": "gateway", "Anthropic-Version": "client",
	} {
		client.Set(k, v)
	}
	p := &Provider{ID: "p", Headers: map[string]string{"anthropic-version": "2023-06-01"}}
	h := upstreamHeader(client, p, &Connection{ID: "k1", APIKey: "sk-k1"})
	assert.Equal(t, http.Header{
		"Accept":            {"text/event-stream"},
		"User-Agent":        {"client/1.0"},
		"Anthropic-Version": {"2023-06-01"},
		"Content-Type":      {"application/json"},
		"Authorization":     {"Bearer sk-k1"},
	}, h)
	h.Set("Accept", "changed")
	assert.Equal(t, "text/event-stream", client.Get("Accept"), "the client's header is not shared")
}

func TestProviderHeadersRefused(t *testing.T) {
	for _, tc := range []struct {
		headers map[string]string
		field   string
	}{
		{map[string]string{"authorization": "Bearer x"}, "providers[0].headers.authorization"},
		{map[string]string{"Host": "x"}, "providers[0].headers.Host"},
		{map[string]string{"content-length": "1"}, "providers[0].headers.content-length"},
		{map[string]string{"bad name": "x"}, "providers[0].headers.bad name"},
		{map[string]string{"": "x"}, `providers[0].headers.""`},
		{map[string]string{"x-ok": "a\r\nInjected: 1"}, "providers[0].headers.x-ok"},
	} {
		err := checkProviderHeaders("providers[0]", tc.headers)
		var ce *ConfigError
		if assert.ErrorAs(t, err, &ce, "%v", tc.headers) {
			assert.Equal(t, tc.field, ce.Field)
		}
	}
	assert.NoError(t, checkProviderHeaders("providers[0]", map[string]string{"anthropic-version": "2023-06-01", "X-Title": "a\tb"}))
}

func TestChatContentType(t *testing.T) {
	for _, tc := range []struct {
		values []string
		ok     bool
	}{
		{nil, true},
		{[]string{"application/json"}, true},
		{[]string{"application/json; charset=utf-8"}, true},
		{[]string{"Application/JSON"}, true},
		{[]string{"application/x-www-form-urlencoded"}, false},
		{[]string{"text/plain"}, false},
		{[]string{"application/jsonp"}, false},
		{[]string{"application/json;;"}, false},
		{[]string{""}, false},
		{[]string{"application/json", "text/plain"}, false},
	} {
		h := http.Header{}
		if tc.values != nil {
			h["Content-Type"] = tc.values
		}
		assert.Equal(t, tc.ok, jsonContentType(h), "%q", tc.values)
	}
}

// Two clients with the same session id get different router session
// keys; the same client always gets the same one.
func TestSessionKeyIsPerClient(t *testing.T) {
	k, ok := affinity.NewKey("header", "agent-42")
	require.True(t, ok)
	a, b := sessionFor("alice", k), sessionFor("bob", k)
	assert.NotEqual(t, a, b)
	assert.Equal(t, a, sessionFor("alice", k))
	assert.NotEqual(t, sessionFor("", k), a)
	k2, _ := affinity.NewKey("header", "agent-43")
	assert.NotEqual(t, a, sessionFor("alice", k2))
}

// A terminal answer shown to a client names provider/model only, and
// another client's lease shows as "unavailable" without its timer.
func TestClientViewHidesConnectionsAndLeases(t *testing.T) {
	e := &combo.Error{Code: combo.CodeAllCoolingDown, Status: 503, TerminalReason: "all_targets_cooling_down",
		PoolSize: 2, RetryAfter: 5 * time.Second, Excluded: []combo.Exclusion{
			{Provider: "p", Connection: "k1", Model: "m", Reason: combo.ReasonLeaseHeld, RetryAfter: 4500 * time.Millisecond},
			{Provider: "p", Connection: "k2", Model: "m", Reason: combo.ReasonConnectionCooldown, RetryAfter: 9 * time.Second},
		}}
	v := clientView(e)
	assert.Equal(t, []combo.Exclusion{
		{Provider: "p", Model: "m", Reason: combo.ReasonUnavailable},
		{Provider: "p", Model: "m", Reason: combo.ReasonConnectionCooldown, RetryAfter: 9 * time.Second},
	}, v.Excluded)
	assert.Equal(t, 9*time.Second, v.RetryAfter, "the lease's timer is not the answer's")
	assert.Equal(t, "k1", e.Excluded[0].Connection, "the router's error is not changed")

	up := &combo.Error{Code: combo.CodeUpstream, Status: 502}
	assert.Same(t, up, clientView(up))
}

// The demo's fake providers keep a bounded call log while counting every
// call.
func TestDemoUpstreamsKeepABoundedLog(t *testing.T) {
	u := demoUpstream()
	defer u.Close()
	c := &http.Client{Transport: u.Transport()}
	for range demoCallLog + 10 {
		resp, err := c.Post(u.URL()+"/v1/chat/completions", "application/json", strings.NewReader(`{}`))
		require.NoError(t, err)
		resp.Body.Close()
	}
	assert.Equal(t, demoCallLog+10, u.Total())
	assert.Len(t, u.Calls(), demoCallLog)
	assert.Equal(t, 32, demoCallLog)
}
