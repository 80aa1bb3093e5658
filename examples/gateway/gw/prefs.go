package gw

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"sync"

	"github.com/routeguard/routeguard/combo"
)

// prefsField is the chat body field that carries a request's routing
// preferences. It is removed before the request is forwarded.
const prefsField = "routeguard"

// Codes of the answers to a request's preferences and to a client key's
// in-flight cap.
const (
	codeBadPrefs        = "invalid_routeguard_preferences"
	codeUnknownProvider = "unknown_provider"
	codeNoProviderLeft  = "no_provider_allowed"
	codeClientInFlight  = "client_in_flight_limit"
)

// prefs are a request's routing preferences, providers by id:
//
//	"routeguard": {"only": ["openai"], "ignore": ["groq"], "order": ["anthropic", "openai"]}
//
// only keeps the targets of the listed providers, ignore drops those of
// the listed ones, and order tries the listed providers first, in that
// order, then the others in the combo's declared order (an order sets the
// combo's strategy aside). They only narrow what the combo, and the
// client's key, already allow.
type prefs struct {
	only, ignore, order []string
}

// prefsError is a refused preferences field: 400 with code and msg.
type prefsError struct{ code, msg string }

// parsePrefs reads the preferences field strictly: an object with the
// lists only, ignore and order of known provider ids.
func parsePrefs(raw json.RawMessage, providers map[string]*Provider) (prefs, *prefsError) {
	var in struct {
		Only   []string `json:"only"`
		Ignore []string `json:"ignore"`
		Order  []string `json:"order"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return prefs{}, &prefsError{codeBadPrefs,
			`The routeguard field must be an object with the provider lists "only", "ignore" and "order"`}
	}
	for _, list := range [][]string{in.Only, in.Ignore, in.Order} {
		for _, p := range list {
			if providers[p] == nil {
				return prefs{}, &prefsError{codeUnknownProvider, "Unknown provider " + strconv.Quote(p) + " in the routeguard field"}
			}
		}
	}
	return prefs{only: in.Only, ignore: in.Ignore, order: in.Order}, nil
}

func (p prefs) empty() bool { return len(p.only) == 0 && len(p.ignore) == 0 && len(p.order) == 0 }

// allows reports whether provider is left in by only and ignore.
func (p prefs) allows(provider string) bool {
	return (len(p.only) == 0 || slices.Contains(p.only, provider)) && !slices.Contains(p.ignore, provider)
}

// apply returns the targets that only and ignore leave, in the order
// order gives; a fresh slice, ts is not modified.
func (p prefs) apply(ts []combo.Target) []combo.Target {
	out := make([]combo.Target, 0, len(ts))
	for _, t := range ts {
		if p.allows(t.Provider) {
			out = append(out, t)
		}
	}
	if len(p.order) > 0 {
		rank := func(provider string) int {
			if i := slices.Index(p.order, provider); i >= 0 {
				return i
			}
			return len(p.order)
		}
		slices.SortStableFunc(out, func(a, b combo.Target) int { return rank(a.Provider) - rank(b.Provider) })
	}
	return out
}

// narrow returns c narrowed by the preferences (c itself without any);
// ok is false when no target is left.
func (p prefs) narrow(c *combo.Combo) (*combo.Combo, bool) {
	if p.empty() {
		return c, true
	}
	n := *c
	n.Targets = p.apply(c.Targets)
	if len(p.order) > 0 {
		n.Strategy = "priority"
	}
	return &n, len(n.Targets) > 0
}

func writeNoProviderLeft(w http.ResponseWriter) {
	writeOpenAIError(w, http.StatusBadRequest, "invalid_request_error", codeNoProviderLeft,
		"The routeguard field leaves no target of this model")
}

// inFlight counts the requests in flight of each client API key, by key
// id, across reloads.
type inFlight struct {
	mu sync.Mutex
	n  map[string]int
}

// enter counts one more request of key unless it already has limit.
func (f *inFlight) enter(key string, limit int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == nil {
		f.n = map[string]int{}
	}
	if f.n[key] >= limit {
		return false
	}
	f.n[key]++
	return true
}

func (f *inFlight) leave(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n[key]--; f.n[key] <= 0 {
		delete(f.n, key)
	}
}
