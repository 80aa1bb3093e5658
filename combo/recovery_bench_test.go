package combo

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// longStream is a Chat Completions stream of 100 text chunks.
var longStream = func() string {
	var b strings.Builder
	for range 100 {
		b.WriteString(`data: {"id":"c1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{"content":"some words of text"},"finish_reason":null}]}` + "\n\n")
	}
	return b.String() + "data: [DONE]\n\n"
}()

// chunkReader hands a stream on in reads of one event each, as an upstream
// sends them.
type chunkReader struct{ s string }

func (c *chunkReader) Read(p []byte) (int, error) {
	if c.s == "" {
		return 0, io.EOF
	}
	i := strings.Index(c.s, "\n\n") + 2
	n := copy(p, c.s[:i])
	c.s = c.s[n:]
	return n, nil
}

func (c *chunkReader) Close() error { return nil }

// BenchmarkStreamChunks measures a request whose streamed answer has 100
// chunks, read whole, with stream recovery off and with mid-stream
// continuation on (the body then hands on whole events and tracks their
// text).
func BenchmarkStreamChunks(b *testing.B) {
	for _, mode := range []string{"off", "midstream"} {
		b.Run(mode, func(b *testing.B) {
			r, c := benchRouter(b, strategyPriority)
			req := Request{Combo: c}
			if mode == "midstream" {
				c.Settings.StreamRecovery = StreamRecovery{MidStream: true}
				req.Continue = func(ctx context.Context, t *Target, partial string) (*http.Response, error) {
					return nil, io.ErrUnexpectedEOF
				}
			}
			hdr := http.Header{"Content-Type": {"text/event-stream"}}
			send := func(ctx context.Context, t *Target) (*http.Response, error) {
				return &http.Response{StatusCode: 200, Header: hdr, ContentLength: -1, Body: &chunkReader{longStream}}, nil
			}
			ctx := context.Background()
			buf := make([]byte, 32<<10)
			b.ReportAllocs()
			b.SetBytes(int64(len(longStream)))
			for b.Loop() {
				res, err := r.Do(ctx, req, send)
				if err != nil {
					b.Fatal(err)
				}
				for {
					if _, err := res.Response.Body.Read(buf); err != nil {
						break
					}
				}
				res.Response.Body.Close()
			}
		})
	}
}
