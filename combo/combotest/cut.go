package combotest

import (
	"io"
	"net/http"
	"strings"
)

// Cut returns r with its stream broken off after n bytes of its encoded
// events (see Stream.CutAfter): the in-process transport's body then
// returns [ErrReset] from Read, and the loopback server aborts the
// connection, so that its client reads an unexpected end (the server
// writes the bytes before the cut at once, without the stream's pace). r
// must be a stream reply; n ≤ 0, or n at or past the stream's length,
// leaves it whole.
func Cut(r Reply, n int) Reply {
	if r.Stream == nil {
		panic("combotest: Cut of a reply without a stream")
	}
	s := *r.Stream
	s.CutAfter = n
	r.Stream = &s
	return r
}

// Encoded returns the wire form of a stream's events, as the upstream
// sends them; [Cut] counts its bytes in it.
func (s *Stream) Encoded() string {
	var b strings.Builder
	for _, ev := range s.Events {
		b.WriteString(ev.Encode())
	}
	return b.String()
}

// cutBody wraps the body of s in one that breaks off after s.CutAfter
// bytes, or returns it as it is when the stream is not cut.
func cutBody(s *Stream, body io.ReadCloser) io.ReadCloser {
	if s.CutAfter <= 0 || s.CutAfter >= len(s.Encoded()) {
		return body
	}
	return &cutReader{ReadCloser: body, left: s.CutAfter}
}

type cutReader struct {
	io.ReadCloser
	left int
}

func (c *cutReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, ErrReset
	}
	if len(p) > c.left {
		p = p[:c.left]
	}
	n, err := c.ReadCloser.Read(p)
	c.left -= n
	return n, err
}

// serveCut writes the first s.CutAfter bytes of s over the loopback server
// and aborts the connection.
func serveCut(w http.ResponseWriter, flusher http.Flusher, s *Stream) {
	enc := s.Encoded()
	if s.CutAfter >= len(enc) {
		return // whole
	}
	_, _ = io.WriteString(w, enc[:s.CutAfter])
	if flusher != nil {
		flusher.Flush()
	}
	panic(http.ErrAbortHandler)
}
