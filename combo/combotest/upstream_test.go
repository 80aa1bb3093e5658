package combotest_test

import (
	"context"
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
	"go.uber.org/goleak"

	"github.com/routeguard/routeguard/combo/combotest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func get(t *testing.T, c *http.Client, url, token string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(`{"model":"m"}`))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return c.Do(req)
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// Both ways of reaching an upstream must behave the same.
func clients(u *combotest.Upstream) map[string]struct {
	c   *http.Client
	url string
} {
	return map[string]struct {
		c   *http.Client
		url string
	}{
		"transport": {&http.Client{Transport: u.Transport()}, "http://fake"},
		"server":    {&http.Client{}, u.URL()},
	}
}

func TestScriptOrderRepeatAndCredentials(t *testing.T) {
	u := combotest.New()
	defer u.Close()
	u.Script("k1", combotest.Error(503, "down"), combotest.OK("one"))
	u.Script("", combotest.Error(429, "slow down"))

	for name, cl := range clients(u) {
		t.Run(name, func(t *testing.T) {
			want := []struct {
				token  string
				status int
			}{{"k1", 503}, {"k1", 200}, {"k1", 200}, {"other", 429}, {"", 429}}
			for i, w := range want {
				resp, err := get(t, cl.c, cl.url, w.token)
				require.NoError(t, err)
				readAll(t, resp)
				assert.Equal(t, w.status, resp.StatusCode, "call %d", i)
			}
		})
		u.Script("k1", combotest.Error(503, "down"), combotest.OK("one"))
	}
	assert.Equal(t, 6, u.Count("k1"))
	assert.Equal(t, 2, u.Count("other"))
	assert.Equal(t, 10, u.Total())
	calls := u.Calls()
	assert.Equal(t, "/v1/chat/completions", calls[0].Path)
	assert.Equal(t, `{"model":"m"}`, string(calls[0].Body))
	assert.Equal(t, 1, calls[0].N)
	assert.Equal(t, 2, calls[1].N)
}

func TestUnscriptedAnswersOK(t *testing.T) {
	u := combotest.New()
	defer u.Close()
	resp, err := get(t, &http.Client{Transport: u.Transport()}, "http://fake", "x")
	require.NoError(t, err)
	assert.Equal(t, 200, resp.StatusCode)
	assert.Contains(t, readAll(t, resp), `"content":"ok"`)
}

func TestHandlerAndHeaders(t *testing.T) {
	u := combotest.New()
	defer u.Close()
	for name, cl := range clients(u) {
		t.Run(name, func(t *testing.T) {
			u.Handle("", func(c combotest.Call) combotest.Reply {
				if c.N%2 == 1 {
					return combotest.RateLimited(7 * time.Second)
				}
				return combotest.OK("later").WithHeader("X-Seen", c.Credential)
			})
			resp, err := get(t, cl.c, cl.url, "kk")
			require.NoError(t, err)
			readAll(t, resp)
			assert.Equal(t, 429, resp.StatusCode)
			assert.Equal(t, "7", resp.Header.Get("Retry-After"))
			resp, err = get(t, cl.c, cl.url, "kk")
			require.NoError(t, err)
			assert.Contains(t, readAll(t, resp), "later")
			assert.Equal(t, "kk", resp.Header.Get("X-Seen"))
		})
	}
}

func TestStreamPaceInProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := combotest.New()
		defer u.Close()
		u.Script("", combotest.SSE(2*time.Second,
			combotest.ChatDelta("he"), combotest.Heartbeat(), combotest.ToolCall("f", "{}"),
			combotest.Reasoning("hm"), combotest.ResponsesDelta("x"), combotest.AnthropicDelta("y"),
			combotest.ErrorEvent("overloaded", "busy"), combotest.Done()))
		start := time.Now()
		resp, err := get(t, &http.Client{Transport: u.Transport()}, "http://fake", "")
		require.NoError(t, err)
		assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
		body := readAll(t, resp)
		assert.Equal(t, 14*time.Second, time.Since(start), "7 gaps of 2s")
		assert.Equal(t, 8, strings.Count(body, "\n\n"))
		assert.Contains(t, body, ": ping\n\n")
		assert.Contains(t, body, "event: response.output_text.delta\n")
		assert.Contains(t, body, `"text":"y","type":"text_delta"`)
		assert.Contains(t, body, `"tool_calls"`)
		assert.Contains(t, body, `"reasoning_content":"hm"`)
		assert.Contains(t, body, "event: error\ndata: {\"error\":{\"code\":\"overloaded\"")
		assert.True(t, strings.HasSuffix(body, "data: [DONE]\n\n"))
	})
}

func TestTextStreamOverServer(t *testing.T) {
	u := combotest.New()
	defer u.Close()
	u.Script("", combotest.TextStream(time.Millisecond, "a", "b", "c"))
	resp, err := get(t, &http.Client{}, u.URL(), "")
	require.NoError(t, err)
	body := readAll(t, resp)
	assert.Equal(t, 4, strings.Count(body, "data: "))
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
}

func TestLatencyAndHangInProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := combotest.New()
		defer u.Close()
		u.Script("slow", combotest.OK("x").After(3*time.Second))
		u.Script("hang", combotest.Hang())
		c := &http.Client{Transport: u.Transport()}

		start := time.Now()
		resp, err := get(t, c, "http://fake", "slow")
		require.NoError(t, err)
		readAll(t, resp)
		assert.Equal(t, 3*time.Second, time.Since(start))

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://fake/", nil)
		req.Header.Set("Authorization", "Bearer hang")
		start = time.Now()
		_, err = c.Do(req)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 10*time.Second, time.Since(start))
	})
}

func TestStreamHangAfterEndsOnCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		u := combotest.New()
		defer u.Close()
		r := combotest.SSE(0, combotest.ChatDelta("a"))
		r.Stream.HangAfter = true
		u.Script("", r)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://fake/", nil)
		resp, err := (&http.Client{Transport: u.Transport()}).Do(req)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Contains(t, string(b), `"content":"a"`)
		resp.Body.Close()
	})
}

func TestResetBothWays(t *testing.T) {
	u := combotest.New()
	defer u.Close()
	u.Script("", combotest.Reset())
	_, err := get(t, &http.Client{Transport: u.Transport()}, "http://fake", "")
	assert.True(t, errors.Is(err, syscall.ECONNRESET), "in process: %v", err)
	_, err = get(t, &http.Client{}, u.URL(), "")
	assert.Error(t, err, "loopback")
}

func TestCloseEndsHangingHandlers(t *testing.T) {
	u := combotest.New()
	u.Script("", combotest.Hang())
	errc := make(chan error, 1)
	url := u.URL()
	go func() {
		req, _ := http.NewRequest(http.MethodPost, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	for u.Total() == 0 {
		time.Sleep(time.Millisecond)
	}
	u.Close()
	<-errc
	http.DefaultClient.CloseIdleConnections()
}

func TestCredentialHeaders(t *testing.T) {
	tests := []struct {
		h    http.Header
		want string
	}{
		{http.Header{"Authorization": {"Bearer sk-1"}}, "sk-1"},
		{http.Header{"Authorization": {"Basic abc"}}, "Basic abc"},
		{http.Header{"X-Api-Key": {"ak"}}, "ak"},
		{http.Header{}, ""},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, combotest.Credential(tt.h))
	}
}

func TestEventEncode(t *testing.T) {
	assert.Equal(t, "event: x\ndata: a\ndata: b\n\n", combotest.Event{Name: "x", Data: "a\nb"}.Encode())
	assert.Equal(t, "raw", combotest.Event{Raw: "raw", Data: "ignored"}.Encode())
	assert.Equal(t, ": ping\n\n", combotest.Heartbeat().Encode())
}

func postBody(t *testing.T, c *http.Client, body string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://fake/", strings.NewReader(body))
	require.NoError(t, err)
	resp, err := c.Do(req)
	require.NoError(t, err)
	readAll(t, resp)
}

func TestCallLogKeepsLastCallsAndCountsAll(t *testing.T) {
	u := combotest.New()
	defer u.Close()
	u.SetLogSize(100)
	client := &http.Client{Transport: u.Transport()}
	for i := range 10000 {
		postBody(t, client, strconv.Itoa(i))
	}
	calls := u.Calls()
	require.Len(t, calls, 100)
	for i, c := range calls {
		assert.Equal(t, strconv.Itoa(9900+i), string(c.Body), "log entry %d", i)
		assert.Equal(t, 9901+i, c.N)
	}
	assert.Equal(t, 10000, u.Total())
	assert.Equal(t, 10000, u.Count(""))
}

func TestCallLogDefaultsToThousand(t *testing.T) {
	u := combotest.New()
	defer u.Close()
	u.SetLogSize(0) // 0 means the default
	client := &http.Client{Transport: u.Transport()}
	for i := range 1500 {
		postBody(t, client, strconv.Itoa(i))
	}
	calls := u.Calls()
	require.Len(t, calls, combotest.DefaultLogSize)
	assert.Equal(t, 1000, combotest.DefaultLogSize)
	assert.Equal(t, "500", string(calls[0].Body))
	assert.Equal(t, "1499", string(calls[999].Body))
	assert.Equal(t, 1500, u.Total())
}

func TestCallLogResizeKeepsMostRecent(t *testing.T) {
	u := combotest.New()
	defer u.Close()
	u.SetLogSize(5)
	client := &http.Client{Transport: u.Transport()}
	bodies := func() []string {
		var out []string
		for _, c := range u.Calls() {
			out = append(out, string(c.Body))
		}
		return out
	}
	for i := range 7 {
		postBody(t, client, strconv.Itoa(i))
	}
	assert.Equal(t, []string{"2", "3", "4", "5", "6"}, bodies())
	u.SetLogSize(3)
	assert.Equal(t, []string{"4", "5", "6"}, bodies(), "shrinking drops the oldest")
	u.SetLogSize(4)
	postBody(t, client, "7")
	postBody(t, client, "8")
	assert.Equal(t, []string{"5", "6", "7", "8"}, bodies(), "growing keeps what is there")
	assert.Equal(t, 9, u.Total())
}
