package watchdog

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFindErrorEvent(t *testing.T) {
	cases := []struct {
		name   string
		stream string
		want   ErrorEvent
		ok     bool
	}{
		{"openai error mid-stream", chat("partial") + "data: {\"error\":{\"message\":\"Rate limit reached\",\"type\":\"rate_limit_error\",\"code\":\"rate_limit_exceeded\"}}\n\n",
			ErrorEvent{Data: []byte(`{"error":{"message":"Rate limit reached","type":"rate_limit_error","code":"rate_limit_exceeded"}}`),
				Type: "rate_limit_error", Code: "rate_limit_exceeded", Message: "Rate limit reached"}, true},
		{"anthropic error event", "event: error\r\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\r\n\r\n",
			ErrorEvent{Event: "error", Data: []byte(`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`),
				Type: "overloaded_error", Message: "Overloaded"}, true},
		{"responses failed", "data: {\"type\":\"response.failed\",\"response\":{\"error\":{\"code\":\"server_error\",\"message\":\"boom\"}}}\n\n",
			ErrorEvent{Data: []byte(`{"type":"response.failed","response":{"error":{"code":"server_error","message":"boom"}}}`),
				Type: "response.failed", Code: "server_error", Message: "boom"}, true},
		{"responses error type", "data: {\"type\":\"error\",\"code\":\"insufficient_quota\",\"message\":\"quota\",\"status\":429}\n\n",
			ErrorEvent{Data: []byte(`{"type":"error","code":"insufficient_quota","message":"quota","status":429}`),
				Code: "insufficient_quota", Message: "quota", Status: 429}, true},
		{"numeric code and status", "data: {\"error\":{\"code\":429,\"message\":\"slow down\",\"status\":\"429\"}}",
			ErrorEvent{Data: []byte(`{"error":{"code":429,"message":"slow down","status":"429"}}`),
				Code: "429", Message: "slow down", Status: 429}, true},
		{"string error", "data: {\"error\":\"upstream exploded\"}\n",
			ErrorEvent{Data: []byte(`{"error":"upstream exploded"}`), Message: "upstream exploded"}, true},
		{"non-json error event", "event: error\ndata: upstream exploded\n\n",
			ErrorEvent{Event: "error", Data: []byte("upstream exploded")}, true},
		{"clean stream", chat("a") + ping + chatDoneEvt, ErrorEvent{}, false},
		{"null error", "data: {\"error\":null}\n\n", ErrorEvent{}, false},
		{"empty", "", ErrorEvent{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := FindErrorEvent([]byte(tc.stream))
			require.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestFindErrorEventFirstOnly(t *testing.T) {
	stream := "data: {\"error\":{\"message\":\"one\"}}\n\ndata: {\"error\":{\"message\":\"two\"}}\n\n"
	got, ok := FindErrorEvent([]byte(stream))
	require.True(t, ok)
	assert.Equal(t, "one", got.Message)
}

func TestErrorEventIsCopied(t *testing.T) {
	buf := []byte("data: {\"error\":{\"message\":\"one\"}}\n\n")
	got, ok := FindErrorEvent(buf)
	require.True(t, ok)
	for i := range buf {
		buf[i] = 'x'
	}
	assert.Equal(t, `{"error":{"message":"one"}}`, string(got.Data))
}

func TestErrorEventSSE(t *testing.T) {
	cases := []struct {
		stream string
		want   string
	}{
		{"event: error\ndata: upstream exploded\n\n", "event: error\ndata: upstream exploded\n\n"},
		{"event: error\r\ndata:{\"error\":\r\ndata: \"x\"}\r\n\r\n", "event: error\ndata: {\"error\":\ndata: \"x\"}\n\n"},
		{chat("a") + "data: {\"error\":{\"message\":\"one\"}}\n\n", "data: {\"error\":{\"message\":\"one\"}}\n\n"},
		{"event: error\n\n", "event: error\n\n"},
	}
	for _, tc := range cases {
		ev, ok := FindErrorEvent([]byte(tc.stream))
		require.True(t, ok, "%q", tc.stream)
		sse := ev.SSE()
		assert.Equal(t, tc.want, string(sse))
		again, ok := FindErrorEvent(sse)
		require.True(t, ok)
		assert.Equal(t, ev, again, "round trip of %q", tc.stream)
	}
}
