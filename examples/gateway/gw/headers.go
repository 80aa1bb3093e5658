package gw

import (
	"maps"
	"mime"
	"net/http"
	"slices"
	"strings"
)

// forwardedHeaders are the only client request headers that go upstream.
// Everything else — the client's Authorization, X-Api-Key, Api-Key,
// Proxy-Authorization, Cookie, Forwarded, X-Forwarded-*, X-Real-Ip, the
// session and lease headers, and any header not listed — stays at the
// gateway.
var forwardedHeaders = []string{"Accept", "User-Agent"}

// upstreamHeader builds the header of one upstream attempt: the allowed
// client headers, the provider's configured headers, the JSON content
// type and the connection's key as bearer token.
func upstreamHeader(client http.Header, p *Provider, cn *Connection) http.Header {
	h := make(http.Header, len(forwardedHeaders)+len(p.Headers)+2)
	for _, k := range forwardedHeaders {
		if vs := client.Values(k); len(vs) > 0 {
			h[k] = append([]string(nil), vs...)
		}
	}
	for k, v := range p.Headers {
		h.Set(k, v)
	}
	h.Set("Content-Type", "application/json")
	h.Set("Authorization", "Bearer "+cn.APIKey)
	return h
}

// reservedProviderHeaders may not be set by a provider's headers: the
// gateway sets them itself (Authorization from the connection's key) or
// they belong to the transport.
var reservedProviderHeaders = map[string]bool{
	"Authorization": true, "Content-Type": true, "Content-Length": true, "Host": true,
	"Connection": true, "Keep-Alive": true, "Transfer-Encoding": true, "Te": true,
	"Trailer": true, "Upgrade": true, "Proxy-Authorization": true, "Proxy-Connection": true,
}

// checkProviderHeaders refuses header names and values that are not valid
// HTTP or that the gateway reserves. f is the field path of the provider.
func checkProviderHeaders(f string, hs map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(hs)) {
		v := hs[k]
		kf := f + ".headers." + keyName(k)
		switch {
		case !validHeaderName(k):
			return &ConfigError{Field: kf, Problem: "not a valid header name"}
		case reservedProviderHeaders[http.CanonicalHeaderKey(k)]:
			return &ConfigError{Field: kf, Problem: "set by the gateway itself (a connection's apiKey is its Authorization)"}
		case !validHeaderValue(v):
			return &ConfigError{Field: kf, Problem: "not a valid header value"}
		}
	}
	return nil
}

// jsonContentType reports whether a chat request's Content-Type is
// acceptable: application/json, with or without parameters, in any case,
// or no Content-Type at all (the body must then still be JSON).
func jsonContentType(h http.Header) bool {
	v := h.Values("Content-Type")
	if len(v) == 0 {
		return true
	}
	mt, _, err := mime.ParseMediaType(v[0])
	return err == nil && len(v) == 1 && strings.EqualFold(mt, "application/json")
}

// clientHiddenHeaders are upstream response headers that the gateway does
// not relay: hop-by-hop headers, cookies, and the framing the gateway
// does itself.
var clientHiddenHeaders = []string{"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer",
	"Transfer-Encoding", "Upgrade", "Content-Length", "Set-Cookie", "Set-Cookie2"}

// relayHeader copies an upstream answer's headers to dst, leaving out
// clientHiddenHeaders and the headers the upstream's Connection header
// names. Retry hints are sanitised when the status line is written.
func relayHeader(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append([]string(nil), vs...)
	}
	for _, c := range src.Values("Connection") {
		for _, k := range strings.Split(c, ",") {
			if k = strings.TrimSpace(k); k != "" {
				dst.Del(k)
			}
		}
	}
	for _, k := range clientHiddenHeaders {
		dst.Del(k)
	}
}

// validHeaderName reports whether k is an HTTP token (RFC 9110 5.1).
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// validHeaderValue reports whether v holds no control characters other
// than a tab (RFC 9110 5.5).
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
