package affinity

import (
	"net/http"
	"net/textproto"
)

// The session headers read by every Extractor, in order of precedence, in
// canonical form.
const (
	headerCodexSession = "X-Codex-Session-Id"
	headerSession      = "X-Session-Id"
	headerOmniSession  = "X-Omniroute-Session"
)

var builtinHeaders = [...]string{headerCodexSession, headerSession, headerOmniSession}

// An Extractor derives session keys from requests. The zero Extractor reads
// the built-in session headers and the request body.
//
// Headers: the first session header that is present with a non-empty value
// decides. The built-in headers come first, matched case-insensitively:
//
//	X-Codex-Session-Id
//	X-Session-Id
//	X-Omniroute-Session
//
// then [Extractor.Headers] in order. If that first present header does not
// yield a key (it is only whitespace, or longer than 4096 characters), the
// body is read next; later headers are not consulted. Only the first value
// of a header counts. A header key has the source label "header".
//
// Body: see [Extractor.KeyFromBody].
//
// An Extractor is safe for concurrent use as long as Headers is not modified.
type Extractor struct {
	// Headers lists extra session header names, consulted after the
	// built-in ones. Names are matched case-insensitively.
	Headers []string
}

// KeyFrom derives the session key of a request with the zero [Extractor]:
// the built-in session headers, then the JSON body. It reports false when the
// request carries no usable session identity.
func KeyFrom(h http.Header, body []byte) (Key, bool) {
	var e Extractor
	return e.KeyFrom(h, body)
}

// KeyFrom derives the session key of a request from its headers, then its
// JSON body. It reports false when neither yields a key. A nil body reads
// the headers alone.
func (e *Extractor) KeyFrom(h http.Header, body []byte) (Key, bool) {
	if v, ok := e.firstHeader(h); ok {
		if k, ok := NewKey("header", v); ok {
			return k, true
		}
	}
	return e.KeyFromBody(body)
}

// firstHeader returns the first value of the first session header present
// with a non-empty value.
func (e *Extractor) firstHeader(h http.Header) (string, bool) {
	if len(h) == 0 {
		return "", false
	}
	for _, name := range builtinHeaders {
		if v := h[name]; len(v) > 0 && v[0] != "" {
			return v[0], true
		}
	}
	if e == nil {
		return "", false
	}
	for _, name := range e.Headers {
		if v := h[textproto.CanonicalMIMEHeaderKey(name)]; len(v) > 0 && v[0] != "" {
			return v[0], true
		}
	}
	return "", false
}

// StripHeaders removes the built-in session headers from h, so that they are
// not forwarded upstream.
func StripHeaders(h http.Header) {
	var e Extractor
	e.StripHeaders(h)
}

// StripHeaders removes the built-in session headers and [Extractor.Headers]
// from h, so that they are not forwarded upstream.
func (e *Extractor) StripHeaders(h http.Header) {
	if h == nil {
		return
	}
	for _, name := range builtinHeaders {
		h.Del(name)
	}
	if e == nil {
		return
	}
	for _, name := range e.Headers {
		h.Del(name)
	}
}
