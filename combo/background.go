package combo

import (
	"bytes"
	"encoding/json"
	"errors"
)

// BackgroundWarning is the warning reported when a background request is
// served synchronously.
const BackgroundWarning = "background mode is not supported: the request was served synchronously"

// ErrNotJSONObject is returned by [DegradeBackground] for a body that is not
// a JSON object.
var ErrNotJSONObject = errors.New("combo: request body is not a JSON object")

// DegradeBackground turns a Responses API request that asks for background
// processing ("background": true) into a synchronous one by removing the
// field. It returns the body to send and whether it changed; when it did,
// the caller should pass [BackgroundWarning] on to the client (for example
// in a Warning header). A body without "background": true is returned as
// is. The rewritten body keeps every other field, with object keys in
// sorted order.
func DegradeBackground(body []byte) (out []byte, degraded bool, err error) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return body, false, ErrNotJSONObject
	}
	// A key spelt with escapes ("backgr\u006fund") needs the full parse.
	if !bytes.Contains(trimmed, []byte(`"background"`)) && !bytes.Contains(trimmed, []byte(`\u`)) {
		if !json.Valid(trimmed) {
			return body, false, ErrNotJSONObject
		}
		return body, false, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &fields); err != nil {
		return body, false, ErrNotJSONObject
	}
	v, ok := fields["background"]
	if !ok {
		return body, false, nil
	}
	var on bool
	if json.Unmarshal(v, &on) != nil || !on {
		return body, false, nil
	}
	delete(fields, "background")
	out, err = marshalObject(fields)
	if err != nil {
		return body, false, err
	}
	return out, true, nil
}

// marshalObject encodes the members of a JSON object with sorted keys and
// without HTML escaping, so text such as "a<b" in a prompt is kept as it
// was sent.
func marshalObject(fields map[string]json.RawMessage) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(fields); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
