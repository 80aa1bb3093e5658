package gw

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo"
)

// The body goes upstream byte for byte as it came, but for the model's
// value; the routeguard field is cut out with its comma.
func TestWithModelRewritesInPlace(t *testing.T) {
	for _, tt := range []struct{ name, in, model, want string }{
		{"first", `{"model":"combo","messages":[{"role":"user","content":"hi"}]}`, "m",
			`{"model":"m","messages":[{"role":"user","content":"hi"}]}`},
		{"white space kept", "{ \"stream\" : true ,\n \"model\" :\t\"combo\" , \"x\":1 }\n", "gpt-4o",
			"{ \"stream\" : true ,\n \"model\" :\t\"gpt-4o\" , \"x\":1 }\n"},
		{"routeguard last", `{"model":"c","routeguard":{"only":["a"]}}`, "m", `{"model":"m"}`},
		{"routeguard first", `{ "routeguard":{"only":["a"]}, "model":"c"}`, "m", `{ "model":"m"}`},
		{"routeguard between", `{"a":1, "routeguard":{}, "model":"c"}`, "m", `{"a":1, "model":"m"}`},
		{"duplicates all set", `{"model":"x","model":"c","routeguard":1,"routeguard":2}`, "m", `{"model":"m","model":"m"}`},
		{"escaped names", `{"mod\u0065l":"c","r\u006futeguard":{}}`, "m", `{"mod\u0065l":"m"}`},
		{"model needing escapes", `{"model":"c"}`, `a"b<`, `{"model":"a\"b\u003c"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cb, ok := parseChatBody([]byte(tt.in))
			require.True(t, ok)
			assert.Equal(t, tt.want, string(cb.withModel(tt.model)))
		})
	}
	in := []byte(`{"model":"m","stream":true}`)
	cb, _ := parseChatBody(in)
	out := cb.withModel("m")
	assert.Same(t, &in[0], &out[0], "a body that needs no change is sent as it is")
}

// oldFields is how the body was read before the in-place scan: decoded
// whole into its fields.
func oldFields(body []byte) (map[string]json.RawMessage, bool) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return nil, false
	}
	return fields, true
}

func decodeAny(t *testing.T, b []byte) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return v
}

// FuzzWithModel checks the in-place reading and rewriting of a chat body
// against decoding it whole, setting the model and encoding it again: the
// same bodies are refused, the same model and tool count are read, and
// the body sent upstream means the same; outside the model's value it is
// the client's bytes.
func FuzzWithModel(f *testing.F) {
	f.Add([]byte(`{"model":"combo","messages":[{"role":"user","content":"hi"}],"tools":[{},{}]}`), "gpt-4o")
	f.Add([]byte(` {"routeguard":{"only":["p"]},"model":"c","stream":true} `), "m")
	f.Add([]byte(`{"model":"\u0063","model":null,"tools":null}`), "m")
	f.Add([]byte(`{"model":1}`), "m")
	f.Add([]byte(`[{"model":"c"}]`), "m")
	f.Add([]byte(`{"model":"c",}`), "m")
	f.Add([]byte(`null`), "m")
	f.Add([]byte("{\"model\":\"\xff\"}"), "\xfe<&>")
	f.Fuzz(func(t *testing.T, body []byte, model string) {
		old, oldOK := oldFields(body)
		cb, ok := parseChatBody(body)
		if ok != oldOK {
			t.Fatalf("parseChatBody(%q) = %v, decoding says %v", body, ok, oldOK)
		}
		if !ok {
			return
		}
		var oldModel string
		oldModelErr := json.Unmarshal(old["model"], &oldModel)
		gotModel, gotOK := cb.modelName()
		if gotOK != (oldModelErr == nil && old["model"] != nil && string(old["model"]) != "null") || gotModel != oldModel {
			t.Fatalf("model of %q = %q, %v; decoding says %q, %v", body, gotModel, gotOK, oldModel, oldModelErr)
		}
		var list []json.RawMessage
		oldTools := 0
		if json.Unmarshal(old["tools"], &list) == nil {
			oldTools = len(list)
		}
		if got := cb.toolCount(); got != oldTools {
			t.Fatalf("tools of %q = %d, decoding says %d", body, got, oldTools)
		}
		if !gotOK || gotModel == "" {
			return // refused before anything is sent
		}
		_, hadPrefs := old[prefsField]
		delete(old, prefsField)
		want, err := withModel(old, model)
		if err != nil {
			t.Fatal(err)
		}
		got := cb.withModel(model)
		if !json.Valid(got) {
			t.Fatalf("withModel(%q) = %q, not JSON", body, got)
		}
		if g, w := decodeAny(t, got), decodeAny(t, want); !reflect.DeepEqual(g, w) {
			t.Fatalf("withModel(%q) = %q, means %v; want %v", body, got, g, w)
		}
		if !hadPrefs && cb.singleModel() {
			start := bytes.Index(body, cb.model)
			end := start + len(cb.model)
			m := appendJSONString(nil, model)
			if !bytes.Equal(got[:start], body[:start]) || !bytes.Equal(got[start+len(m):], body[end:]) {
				t.Fatalf("withModel(%q) = %q: bytes outside the model changed", body, got)
			}
		}
	})
}

// errAfter is a body that returns data and then err.
type errAfter struct {
	r   io.Reader
	err error
}

func (e *errAfter) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		return n, e.err
	}
	return n, err
}

func (e *errAfter) Close() error { return nil }

// relayed serves one answer through relay and returns what a Go client
// reads of it.
func relayed(t *testing.T, contentType, body string, contentLength int64, readErr error) (*http.Response, string, error) {
	t.Helper()
	s := &Server{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h := http.Header{"Content-Type": {contentType}}
		var b io.ReadCloser = io.NopCloser(strings.NewReader(body))
		if readErr != nil {
			b = &errAfter{r: strings.NewReader(body), err: readErr}
		}
		s.relay(w, &combo.Result{Response: &http.Response{StatusCode: http.StatusOK, Header: h, Body: b, ContentLength: contentLength},
			Target: combo.Target{Provider: "p", Model: "m"}})
	}))
	t.Cleanup(srv.Close)
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	return resp, string(got), err
}

// A committed event stream that breaks off ends with an error event the
// client can read, and then a cut: never a clean end.
func TestRelayBrokenStreamSendsErrorEventThenCuts(t *testing.T) {
	const events = "data: {\"choices\":[{\"delta\":{\"content\":\"he\"}}]}\n\n"
	for _, tt := range []struct {
		name string
		err  error
		code string
	}{
		{"truncated", io.ErrUnexpectedEOF, "stream_truncated"},
		{"deadline", combo.ErrRequestTimeout, "request_timeout"},
		{"other", errors.New("read tcp 10.0.0.1:443: connection reset"), "stream_error"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, got, err := relayed(t, "text/event-stream", events, -1, tt.err)
			assert.ErrorIs(t, err, io.ErrUnexpectedEOF, "the chunked answer is cut")
			assert.Equal(t, "p/m", resp.Header.Get("X-Routeguard-Target"))
			require.True(t, strings.HasPrefix(got, events), got)
			assert.Equal(t, string(combo.StreamError(tt.err)), got[len(events):])

			sc := bufio.NewScanner(strings.NewReader(got[len(events):]))
			var lines []string
			for sc.Scan() {
				lines = append(lines, sc.Text())
			}
			require.Len(t, lines, 3)
			assert.Equal(t, "event: error", lines[0])
			var e struct {
				Error struct{ Type, Code, Message string } `json:"error"`
			}
			require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(lines[1], "data: ")), &e))
			assert.Equal(t, "upstream_error", e.Error.Type)
			assert.Equal(t, tt.code, e.Error.Code)
			assert.NotContains(t, lines[1], "10.0.0.1", "no internal details")
		})
	}
}

// Any other answer that breaks off is cut without an error event: the
// client gets no answer at all (nothing was flushed), or a short one that
// ends in an error, never a clean end.
func TestRelayBrokenPlainAnswerIsCutOnly(t *testing.T) {
	for _, size := range []int{10, 100 << 10} {
		body := `{"a":"` + strings.Repeat("x", size) + `"}`
		_, got, err := relayed(t, "application/x-ndjson", body, -1, io.ErrUnexpectedEOF)
		assert.Error(t, err, "size %d", size)
		assert.NotContains(t, got, "event: error")
		assert.Less(t, len(got), len(body)+1)
	}
}

// A whole answer goes out with its length, and a stream in chunks.
func TestRelayFraming(t *testing.T) {
	const body = `{"id":"c1","choices":[]}`
	resp, got, err := relayed(t, "application/json", body, int64(len(body)), nil)
	require.NoError(t, err)
	assert.Equal(t, body, got)
	assert.Equal(t, int64(len(body)), resp.ContentLength)
	assert.Empty(t, resp.TransferEncoding)

	big := `{"pad":"` + strings.Repeat("x", 100<<10) + `"}`
	resp, got, err = relayed(t, "application/json", big, int64(len(big)), nil)
	require.NoError(t, err)
	assert.Equal(t, big, got)
	assert.Equal(t, int64(len(big)), resp.ContentLength)

	resp, got, err = relayed(t, "text/event-stream; charset=utf-8", "data: [DONE]\n\n", -1, nil)
	require.NoError(t, err)
	assert.Equal(t, "data: [DONE]\n\n", got)
	assert.Equal(t, []string{"chunked"}, resp.TransferEncoding)
}

func TestIsEventStream(t *testing.T) {
	for ct, want := range map[string]bool{
		"text/event-stream": true, " Text/Event-Stream; charset=utf-8": true,
		"application/json": false, "text/event": false, "": false,
	} {
		assert.Equal(t, want, isEventStream(http.Header{"Content-Type": {ct}}), ct)
	}
}

func BenchmarkChatBody(b *testing.B) {
	body := []byte(`{"model":"combo","stream":true,"temperature":0.7,"messages":[` +
		`{"role":"system","content":"` + strings.Repeat("You are a helpful assistant who answers briefly. ", 16) + `"},` +
		`{"role":"user","content":"` + strings.Repeat(`Please summarise the notes on request routing and retries.\n`, 18) + `"}]}`)
	b.Run("scan", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			cb, ok := parseChatBody(body)
			if !ok {
				b.Fatal("refused")
			}
			m, _ := cb.modelName()
			_ = cb.toolCount()
			_ = cb.withModel(m + "-target")
		}
	})
	b.Run("decode", func(b *testing.B) { // as before the scan
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			fields, ok := oldFields(body)
			if !ok {
				b.Fatal("refused")
			}
			var m string
			_ = json.Unmarshal(fields["model"], &m)
			_, _ = withModel(fields, m+"-target")
		}
	})
}
