package combo

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
)

// Transport is an [http.RoundTripper] that sends each request through a
// [Router]: a plain http.Client call to a combo is screened, ordered,
// dispatched, and falls back like any routed request.
//
// The request body is read once and replayed for every attempt. When no
// attempt succeeds the caller still gets an *http.Response: the last
// upstream answer (for an [UpstreamError]) or the router's own 503/404
// answer (for a [TerminalError]); only context errors and lease refusals
// come back as errors.
type Transport struct {
	Router *Router
	// Combo returns the combo that serves req. Required.
	Combo func(req *http.Request) (*Combo, error)
	// Rewrite turns the caller's request into the request for one target
	// (base URL, credentials, model). It receives a clone with a fresh body
	// and may modify it. Required.
	Rewrite func(req *http.Request, t *Target) (*http.Request, error)
	// Prepare, if set, fills the routing facts of the request (session,
	// lease, tools) from the caller's request.
	Prepare func(req *http.Request, rr *Request)
	// Base sends the rewritten requests; nil means http.DefaultTransport.
	Base http.RoundTripper
}

// maxReplayBody bounds the request body Transport keeps for replays.
const maxReplayBody = 32 << 20

// RoundTrip routes req.
func (tr *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if tr.Router == nil || tr.Combo == nil || tr.Rewrite == nil {
		return nil, errors.New("combo: Transport needs Router, Combo and Rewrite")
	}
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		var err error
		body, err = io.ReadAll(io.LimitReader(req.Body, maxReplayBody+1))
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		if len(body) > maxReplayBody {
			return nil, errors.New("combo: request body too large to replay")
		}
	}
	c, err := tr.Combo(req)
	if err != nil {
		return nil, err
	}
	rr := Request{Combo: c}
	if tr.Prepare != nil {
		tr.Prepare(req, &rr)
	}
	base := tr.Base
	if base == nil {
		base = http.DefaultTransport
	}
	send := func(ctx context.Context, t *Target) (*http.Response, error) {
		out := req.Clone(ctx)
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.ContentLength = int64(len(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		out, err := tr.Rewrite(out, t)
		if err != nil {
			return nil, err
		}
		return base.RoundTrip(out)
	}
	res, err := tr.Router.Do(req.Context(), rr, send)
	if err == nil {
		return res.Response, nil
	}
	var te *TerminalError
	if errors.As(err, &te) {
		return te.Response(req), nil
	}
	var ue *UpstreamError
	if errors.As(err, &ue) && ue.Header != nil {
		resp := &http.Response{
			Status:        strconv.Itoa(ue.Status) + " " + http.StatusText(ue.Status),
			StatusCode:    ue.Status,
			Proto:         "HTTP/1.1",
			ProtoMajor:    1,
			ProtoMinor:    1,
			Header:        ue.Header.Clone(),
			Body:          io.NopCloser(bytes.NewReader(ue.Body)),
			ContentLength: int64(len(ue.Body)),
			Request:       req,
		}
		resp.Header.Del("Content-Length")
		return resp, nil
	}
	return nil, err
}
