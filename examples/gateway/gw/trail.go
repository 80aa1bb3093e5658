package gw

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/routeguard/routeguard/combo"
)

// The attempt trail: a client that sends TrailRequestHeader: 1 gets the
// request's attempts in the TrailHeader of the answer, successful or not.
const (
	TrailRequestHeader = "X-Routeguard-Trail"
	TrailHeader        = "X-Routeguard-Trail"
	// maxTrail bounds the header's length; the entries past it are
	// counted in a last "+N" entry.
	maxTrail = 2048
)

// wantsTrail reports whether the client asked for the attempt trail.
func wantsTrail(r *http.Request) bool {
	v := strings.TrimSpace(r.Header.Get(TrailRequestHeader))
	return v == "1" || strings.EqualFold(v, "true")
}

// setTrail sets the trail header of a chat answer when the client asked
// for it.
func setTrail(w http.ResponseWriter, r *http.Request, res *combo.Result, err error) {
	if !wantsTrail(r) {
		return
	}
	var attempts []combo.Attempt
	if res != nil {
		attempts = res.Attempts
	}
	if ce, ok := errors.AsType[*combo.Error](err); ok && len(ce.Attempts) > 0 {
		attempts = ce.Attempts
	}
	w.Header().Set(TrailHeader, trail(attempts))
}

// trail is the compact form of a request's attempts: one entry per
// attempt, comma-separated, each provider/model;outcome;status;reason;ms
// (status 0 when there was no answer, reason empty for a success, ms the
// attempt's duration in whole milliseconds). It names no connection and
// carries no free text: a reason that is not a code reads "other". Past
// maxTrail bytes, the entries left are counted in a last "+N".
func trail(attempts []combo.Attempt) string {
	var b strings.Builder
	for i := range attempts {
		a := &attempts[i]
		reason := a.Code
		if a.Outcome == combo.OutcomeSkipped {
			reason = string(a.Reason)
		}
		entry := token(a.Target.Provider) + "/" + token(a.Target.Model) + ";" + string(a.Outcome) + ";" +
			strconv.Itoa(a.Status) + ";" + code(reason) + ";" + strconv.FormatInt(a.Duration.Milliseconds(), 10)
		sep := ""
		if b.Len() > 0 {
			sep = ","
		}
		room := maxTrail - b.Len() - len(sep) - len(entry)
		if left := len(attempts) - i - 1; left > 0 {
			room -= len(",+") + len(strconv.Itoa(left)) // for a "+N" written later
		}
		if room < 0 {
			b.WriteString(sep + "+" + strconv.Itoa(len(attempts)-i))
			break
		}
		b.WriteString(sep + entry)
	}
	return b.String()
}

// token keeps the characters of a provider id or model name that need no
// quoting in the trail (letters, digits and ._-:@+/), and turns any other
// into '_'.
func token(s string) string {
	ok := func(c byte) bool {
		return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			strings.IndexByte("._-:@+/", c) >= 0
	}
	clean := true
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	b := []byte(s)
	for i := range b {
		if !ok(b[i]) {
			b[i] = '_'
		}
	}
	return string(b)
}

// code returns s when it reads as a code (at most 64 letters, digits and
// _-.:), else "other".
func code(s string) string {
	if len(s) > 64 {
		return "other"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.' || c == ':') {
			return "other"
		}
	}
	return s
}
