package combo

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// streamBody is a short, complete Chat Completions stream.
const streamBody = "data: {\"choices\":[{\"delta\":{\"content\":\"ok\"}}]}\n\ndata: [DONE]\n\n"

// BenchmarkDoOverheadStream is BenchmarkDoOverhead for a streamed answer:
// held to its first text under the watchdog, committed, read and closed.
func BenchmarkDoOverheadStream(b *testing.B) {
	r, c := benchRouter(b, strategyPriority)
	hdr := http.Header{"Content-Type": {"text/event-stream"}}
	send := func(ctx context.Context, t *Target) (*http.Response, error) {
		return &http.Response{StatusCode: 200, Header: hdr, ContentLength: -1,
			Body: staticBody{strings.NewReader(streamBody)}}, nil
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res, err := r.Do(ctx, Request{Combo: c}, send)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Response.Body)
		res.Response.Body.Close()
	}
}
