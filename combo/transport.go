package combo

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/routeguard/routeguard/affinity"
	"github.com/routeguard/routeguard/lease"
)

// Transport is an [http.RoundTripper] that sends each request through a
// [Router]: a plain http.Client call to a combo is screened, ordered,
// dispatched, and falls back like any routed request.
//
// The request body is read once and replayed for every attempt. Combo and
// Prepare see the caller's request with that body ready to read again: a
// Combo that picks the combo by the body's model reads req.Body (or calls
// req.GetBody) as it would on a fresh request, and each callback gets a body
// of its own. Neither may keep the request after it returns.
//
// Each attempt's request is a clone of the caller's without routeguard's
// control headers: the lease headers (see [lease.StripHeaders]) and the
// built-in session headers (see [affinity.StripHeaders]) are removed
// before Rewrite sees it, so that they never reach an upstream; set
// KeepControlHeaders to send them on. Headers that Rewrite adds are left as
// they are.
//
// A successful answer is the router's: a plain answer read whole (never a
// short body: a body that broke off was a failed attempt), a stream whose
// Read returns the error, never io.EOF, when it breaks off after its commit
// (io.ErrUnexpectedEOF when it ends before its Content-Length,
// [ErrRequestTimeout] at the request's deadline). When no attempt succeeds
// the caller still gets an *http.Response: the last upstream answer or the
// router's own 503/429/404/400 answer (for a terminal one), as
// [Error.Response] renders them, with every Retry-After a whole number of
// seconds in 1..86 400; only context errors, lease refusals and failures
// without any upstream answer (a transport failure, a body that broke off, a
// request timeout) come back as errors.
type Transport struct {
	Router *Router
	// Combo returns the combo that serves req. Required.
	Combo func(req *http.Request) (*Combo, error)
	// Rewrite turns the caller's request into the request for one target
	// (base URL, credentials, model). It receives a clone with a fresh body,
	// without the control headers, and may modify it. Required.
	Rewrite func(req *http.Request, t *Target) (*http.Request, error)
	// Prepare, if set, fills the routing facts of the request (session,
	// lease, tools) from the caller's request, control headers included.
	Prepare func(req *http.Request, rr *Request)
	// Base sends the rewritten requests; nil means http.DefaultTransport.
	Base http.RoundTripper
	// KeepControlHeaders sends the lease and session headers upstream
	// instead of removing them. Default false.
	KeepControlHeaders bool
}

// maxReplayBody bounds the request body Transport keeps for replays.
const maxReplayBody = 32 << 20

// withBody returns a shallow copy of req whose body reads body from its
// start, with GetBody giving it again.
func withBody(req *http.Request, body []byte) *http.Request {
	in := new(http.Request)
	*in = *req
	if req.Body == nil || req.Body == http.NoBody {
		return in
	}
	in.Body = io.NopCloser(bytes.NewReader(body))
	in.ContentLength = int64(len(body))
	in.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return in
}

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
	c, err := tr.Combo(withBody(req, body))
	if err != nil {
		return nil, err
	}
	rr := Request{Combo: c}
	if tr.Prepare != nil {
		tr.Prepare(withBody(req, body), &rr)
	}
	base := tr.Base
	if base == nil {
		base = http.DefaultTransport
	}
	send := func(ctx context.Context, t *Target) (*http.Response, error) {
		out := req.Clone(ctx)
		if !tr.KeepControlHeaders {
			lease.StripHeaders(out.Header)
			affinity.StripHeaders(out.Header)
		}
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
	if e, ok := errors.AsType[*Error](err); ok &&
		(e.TerminalReason != "" || (e.Code == CodeUpstream && e.Header != nil)) {
		return e.Response(req), nil
	}
	return nil, err
}
