package gw

import (
	"encoding/json"
	"io"
	"net/http"
	"unicode/utf8"

	"github.com/routeguard/routeguard/internal/jsonscan"
)

// chatBody is a chat request body, read in place: the body as received
// (a valid JSON object) and the values of the top-level fields routing
// reads. Of duplicate fields the last counts, as when decoding.
type chatBody struct {
	raw   []byte
	start int    // index of the opening brace
	model []byte // the model value; nil when absent
	prefs []byte // the routeguard value; nil when absent
	tools []byte // the tools value; nil when absent
}

// parseChatBody reads body; false when it is not a JSON object.
func parseChatBody(body []byte) (chatBody, bool) {
	i := jsonscan.Space(body, 0)
	if i >= len(body) || body[i] != '{' || !jsonscan.Valid(body) {
		return chatBody{}, false
	}
	cb := chatBody{raw: body, start: i}
	for j := i + 1; ; {
		ks, ke, vs, ve, ok := jsonscan.Member(body, j)
		if !ok {
			break
		}
		switch key := body[ks:ke]; {
		case jsonscan.KeyIs(key, "model"):
			cb.model = body[vs:ve]
		case jsonscan.KeyIs(key, prefsField):
			cb.prefs = body[vs:ve]
		case jsonscan.KeyIs(key, "tools"):
			cb.tools = body[vs:ve]
		}
		j = ve
	}
	return cb, true
}

// modelName returns the model field when it is a JSON string.
func (cb *chatBody) modelName() (string, bool) {
	raw := cb.model
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	if jsonscan.IsPlain(raw) {
		return string(raw[1 : len(raw)-1]), true
	}
	s, _ := jsonscan.AppendString(nil, raw, -1)
	return string(s), true
}

// toolCount is the number of items of the tools field when it is an
// array, else 0.
func (cb *chatBody) toolCount() int {
	raw := cb.tools
	if len(raw) == 0 || raw[0] != '[' {
		return 0
	}
	n := 0
	for i := 1; ; n++ {
		_, ve, ok := jsonscan.Item(raw, i)
		if !ok {
			return n
		}
		i = ve
	}
}

// fields decodes the body's fields without the routeguard field, for the
// compositions that rebuild the body.
func (cb *chatBody) fields() map[string]json.RawMessage {
	var fields map[string]json.RawMessage
	_ = json.Unmarshal(cb.raw, &fields) // valid: checked by parseChatBody
	delete(fields, prefsField)
	return fields
}

// withModel returns the body to send upstream: the client's bytes with
// the value of every model field replaced by model and every routeguard
// field removed. Everything else, white space included, is kept as it
// came; a body that needs no change is returned as it is.
func (cb *chatBody) withModel(model string) []byte {
	var mb [128]byte
	m := appendJSONString(mb[:0], model)
	if cb.prefs == nil && string(cb.model) == string(m) && cb.singleModel() {
		return cb.raw
	}
	raw := cb.raw
	out := make([]byte, 0, len(raw)+len(m))
	out = append(out, raw[:cb.start+1]...)
	prev := cb.start + 1 // end of the previous member (or of the brace)
	emitted := false
	for i := prev; ; {
		ks, ke, vs, ve, ok := jsonscan.Member(raw, i)
		if !ok {
			break
		}
		sep := raw[prev:ks] // white space, and the comma for all but the first member
		prev, i = ve, ve
		key := raw[ks:ke]
		if jsonscan.KeyIs(key, prefsField) {
			continue
		}
		if !emitted {
			for k, c := range sep {
				if c == ',' {
					sep = sep[k+1:]
					break
				}
			}
		}
		out = append(out, sep...)
		if jsonscan.KeyIs(key, "model") {
			out = append(out, raw[ks:vs]...)
			out = append(out, m...)
		} else {
			out = append(out, raw[ks:ve]...)
		}
		emitted = true
	}
	return append(out, raw[prev:]...)
}

// singleModel reports whether the body has one model field only.
func (cb *chatBody) singleModel() bool {
	n := 0
	for i := cb.start + 1; ; {
		ks, ke, _, ve, ok := jsonscan.Member(cb.raw, i)
		if !ok {
			return n == 1
		}
		if jsonscan.KeyIs(cb.raw[ks:ke], "model") {
			n++
		}
		i = ve
	}
}

// appendJSONString appends s as a JSON string: as it is between quotes
// when it is printable ASCII without quotes or backslashes (every model
// name in practice), else as encoding/json writes it.
func appendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			b, _ := json.Marshal(s)
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// readBody reads a chat request body of at most MaxRequestBody bytes: in
// one buffer of its Content-Length when it declares one.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	rd := http.MaxBytesReader(w, r.Body, MaxRequestBody)
	if n := r.ContentLength; n > 0 && n <= MaxRequestBody {
		buf := make([]byte, n)
		if _, err := io.ReadFull(rd, buf); err != nil {
			return nil, err
		}
		return buf, nil
	}
	return io.ReadAll(rd)
}
