package restate

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// maxOperatorRules is the most operator rules a set may hold, over all
// providers.
const maxOperatorRules = 50

// Classifier holds the tables and the configuration of the
// classification. Reads take an immutable snapshot through one atomic
// load, so classification never waits for a writer; the writers
// (SetTables, SetOperatorRules, SetConfig) are serialised and swap a new
// snapshot.
//
// The zero value is ready to use with the built-in tables and the default
// [Config]. A Classifier is safe for concurrent use and must not be copied
// after first use.
type Classifier struct {
	mu sync.Mutex // serialises writers
	st atomic.Pointer[state]
}

// state is an immutable snapshot: normalised tables and configuration.
type state struct {
	set      Config
	raw      Tables                    // as given, for Tables()
	t        Tables                    // phrases lower-cased
	restate  map[string][]RestateRule  // lower-cased keys
	rules    map[string][]ProviderRule // lower-cased keys
	opRaw    map[string][]OperatorRule
	op       map[string][]ProviderRule
	fullText map[string]bool
	scoped   map[string]bool
	metric   map[string]bool
	status   map[int]StatusRule
	subBy    map[string][]string
}

var defaultState = sync.OnceValue(func() *state {
	st, err := build(Config{}, DefaultTables(), nil)
	if err != nil {
		panic("restate: built-in tables are invalid: " + err.Error())
	}
	return st
})

// std is the Classifier of the package-level functions: the built-in
// tables and the default Config, never changed.
var std = &Classifier{}

// New returns a Classifier with the configuration c (normalised) and the
// built-in tables. New(Config{}) behaves like the zero Classifier.
func New(c Config) *Classifier {
	st := *defaultState()
	st.set = c.Normalize()
	cl := &Classifier{}
	cl.st.Store(&st)
	return cl
}

func (c *Classifier) load() *state {
	if st := c.st.Load(); st != nil {
		return st
	}
	return defaultState()
}

// Config returns the normalised configuration in use.
func (c *Classifier) Config() Config { return c.load().set }

// SetConfig replaces the configuration (normalised) at run time, for
// example to switch the emergency fallback off; the next classification
// uses it. The tables and operator rules stay.
func (c *Classifier) SetConfig(cfg Config) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := *c.load()
	st.set = cfg.Normalize()
	c.st.Store(&st)
}

// Tables returns a deep copy of the tables in use.
func (c *Classifier) Tables() Tables { return c.load().raw.clone() }

// SetTables validates t and installs a copy of it. An invalid table is
// refused with an [*Error] (code [CodeInvalidRule]) naming the rule, and
// the tables in use stay.
func (c *Classifier) SetTables(t Tables) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.load()
	st, err := build(old.set, t, old.opRaw)
	if err != nil {
		return err
	}
	c.st.Store(st)
	return nil
}

// OperatorRules returns a copy of the operator rules in use, keyed by
// lower-cased provider.
func (c *Classifier) OperatorRules() map[string][]OperatorRule {
	m := make(map[string][]OperatorRule, len(c.load().opRaw))
	for k, v := range c.load().opRaw {
		m[k] = slices.Clone(v)
	}
	return m
}

// SetOperatorRules replaces every operator rule. Provider keys are
// lower-cased and empty lists dropped. The set is validated as a whole: at
// most 50 rules over all providers, status in 100..599, a non-blank Match,
// a scope of model, provider or connection, a non-negative cooldown. An
// invalid set is refused with an [*Error] (code [CodeInvalidRule]) naming
// the rule, and the previous rules stay. A nil or empty map clears the
// operator rules. Operator rules are tried before the built-in rules of
// their provider, and a provider with one gets its rule scopes surfaced
// and its rules matched against the whole failure text.
func (c *Classifier) SetOperatorRules(rules map[string][]OperatorRule) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.load()
	st, err := build(old.set, old.raw, rules)
	if err != nil {
		return err
	}
	c.st.Store(st)
	return nil
}

func build(set Config, t Tables, ops map[string][]OperatorRule) (*state, error) {
	if err := validateTables(t); err != nil {
		return nil, err
	}
	opRaw, op, err := compileOperator(ops)
	if err != nil {
		return nil, err
	}
	st := &state{set: set.Normalize(), raw: t.clone(), opRaw: opRaw, op: op}
	lt := t.clone()
	for _, rs := range lt.Restatements {
		for i := range rs {
			lowerAll(rs[i].Markers)
			lowerAll(rs[i].Excludes)
		}
	}
	for _, rs := range lt.ProviderRules {
		for i := range rs {
			lowerAll(rs[i].Any)
			lowerAll(rs[i].All)
		}
	}
	for i := range lt.TextRules {
		lowerAll(lt.TextRules[i].Phrases)
	}
	for _, p := range lt.Signals.lists(&lt.Signals) {
		lowerAll(*p)
	}
	lowerAll(lt.EmergencyPhrases)
	lowerAll(lt.EmergencyBilling)
	lowerAll(lt.EmergencyBillingNear)
	st.t = lt
	st.restate = lowerKeys(lt.Restatements)
	st.rules = lowerKeys(lt.ProviderRules)
	st.subBy = lowerKeys(lt.Signals.SubscriptionByProvider)
	for _, v := range st.subBy {
		lowerAll(v)
	}
	st.fullText = nameSet(lt.FullTextProviders)
	st.scoped = nameSet(lt.ScopeProviders)
	st.metric = nameSet(lt.MetricQuotaProviders)
	st.status = make(map[int]StatusRule, len(lt.StatusRules))
	for _, r := range lt.StatusRules {
		if _, dup := st.status[r.Status]; !dup {
			st.status[r.Status] = r
		}
	}
	return st, nil
}

func nameSet(names []string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[lower(strings.TrimSpace(n))] = true
	}
	return m
}

func lowerAll(s []string) {
	for i, v := range s {
		s[i] = lower(v)
	}
}

func validStatus(s int) bool { return s >= 100 && s <= 599 }

func validMode(m CooldownMode) bool {
	switch m {
	case CooldownNone, CooldownFixed, CooldownBackoff, CooldownBase:
		return true
	}
	return false
}

func validateTables(t Tables) error {
	for _, p := range slices.Sorted(maps.Keys(t.Restatements)) {
		for i, r := range t.Restatements[p] {
			bad := func(msg string) error { return ruleError(fmt.Sprintf("Restatements[%q][%d]", p, i), r.ID, msg) }
			switch {
			case r.ID == "":
				return bad("empty id")
			case !validStatus(r.ToStatus):
				return bad("toStatus outside 100..599")
			case len(r.FromStatuses) == 0:
				return bad("no fromStatuses")
			case len(r.Markers) == 0 || slices.Contains(r.Markers, ""):
				return bad("empty marker")
			case slices.Contains(r.Excludes, ""):
				return bad("empty exclude marker")
			case r.DefaultRetryAfter < 0:
				return bad("negative defaultRetryAfter")
			}
			for _, s := range r.FromStatuses {
				if !validStatus(s) {
					return bad("fromStatus outside 100..599")
				}
			}
		}
	}
	for _, p := range slices.Sorted(maps.Keys(t.ProviderRules)) {
		for i, r := range t.ProviderRules[p] {
			if err := validateProviderRule(fmt.Sprintf("ProviderRules[%q][%d]", p, i), r); err != nil {
				return err
			}
		}
	}
	for i, r := range t.TextRules {
		if len(r.Phrases) == 0 || slices.Contains(r.Phrases, "") || !validMode(r.Mode) || r.Cooldown < 0 {
			return ruleError(fmt.Sprintf("TextRules[%d]", i), "", "text rule needs non-empty phrases, a valid mode and a non-negative cooldown")
		}
	}
	for i, r := range t.StatusRules {
		if !validStatus(r.Status) || !validMode(r.Mode) || r.Cooldown < 0 {
			return ruleError(fmt.Sprintf("StatusRules[%d]", i), "", "status rule needs a status in 100..599, a valid mode and a non-negative cooldown")
		}
	}
	return nil
}

func validateProviderRule(field string, r ProviderRule) error {
	bad := func(msg string) error { return ruleError(field, r.ID, msg) }
	switch {
	case r.Reason == "":
		return bad("empty reason")
	case r.Cooldown < 0:
		return bad("negative cooldown")
	case slices.Contains(r.Any, "") || slices.Contains(r.All, "") || slices.Contains(r.HeaderZero, ""):
		return bad("empty match text")
	case len(r.Statuses) == 0 && len(r.Any) == 0 && len(r.All) == 0 && len(r.HeaderZero) == 0 &&
		r.HeaderZeroPair == "" && !r.CooldownFromReset:
		return bad("no condition")
	}
	switch r.Scope {
	case "", ScopeProvider, ScopeConnection, ScopeModel, ScopeExact:
	default:
		return bad("unknown scope " + string(r.Scope))
	}
	for _, s := range r.Statuses {
		if !validStatus(s) {
			return bad("status outside 100..599")
		}
	}
	return nil
}

func compileOperator(ops map[string][]OperatorRule) (map[string][]OperatorRule, map[string][]ProviderRule, error) {
	raw := make(map[string][]OperatorRule)
	total := 0
	for _, p := range slices.Sorted(maps.Keys(ops)) {
		if len(ops[p]) == 0 {
			continue
		}
		lp := lower(strings.TrimSpace(p))
		if lp == "" {
			return nil, nil, ruleError(fmt.Sprintf("OperatorRules[%q]", p), "", "empty provider key")
		}
		raw[lp] = append(raw[lp], ops[p]...)
		total += len(ops[p])
	}
	if total > maxOperatorRules {
		return nil, nil, ruleError("OperatorRules", "", fmt.Sprintf("%d rules, more than %d", total, maxOperatorRules))
	}
	out := make(map[string][]ProviderRule, len(raw))
	for p, rs := range raw {
		for i, r := range rs {
			bad := func(msg string) error {
				return ruleError(fmt.Sprintf("OperatorRules[%q][%d]", p, i), operatorID(p, i), msg)
			}
			switch {
			case !validStatus(r.Status):
				return nil, nil, bad("status outside 100..599")
			case strings.TrimSpace(r.Match) == "":
				return nil, nil, bad("empty match")
			case r.Cooldown < 0:
				return nil, nil, bad("negative cooldown")
			}
			switch r.Scope {
			case ScopeModel, ScopeProvider, ScopeConnection:
			default:
				return nil, nil, bad("scope must be model, provider or connection")
			}
			reason := r.Reason
			if reason == "" {
				reason = ReasonQuotaExhausted
				rs[i].Reason = reason
			}
			out[p] = append(out[p], ProviderRule{ID: operatorID(p, i), Statuses: []int{r.Status},
				Any: []string{lower(r.Match)}, Reason: reason, Scope: r.Scope, Cooldown: r.Cooldown, literal: true})
		}
	}
	return raw, out, nil
}

func operatorID(p string, i int) string {
	return "operator:" + p + ":" + strconv.Itoa(i)
}

// lower lower-cases s, allocating only when s has upper-case letters.
func lower(s string) string { return strings.ToLower(s) }

// honorsScope reports whether rule scopes of provider are surfaced in a
// Verdict: true for Tables.ScopeProviders and for any provider with an
// operator rule.
func (c *Classifier) honorsScope(provider string) bool {
	st := c.load()
	p := lower(strings.TrimSpace(provider))
	return p != "" && (st.scoped[p] || len(st.op[p]) > 0)
}

// ruleMatchBody returns the text provider rules of provider match against:
// the whole text for Tables.FullTextProviders and providers with operator
// rules (when the text is not blank), otherwise the structured error when
// there is one, otherwise the text.
func (c *Classifier) ruleMatchBody(provider, structured, text string) string {
	st := c.load()
	p := lower(strings.TrimSpace(provider))
	if (st.fullText[p] || len(st.op[p]) > 0) && strings.TrimSpace(text) != "" {
		return text
	}
	if strings.TrimSpace(structured) != "" {
		return structured
	}
	return text
}

// ruleMatch is the outcome of a provider error rule.
type ruleMatch struct {
	ID         string
	Reason     Reason
	Scope      Scope
	Cooldown   time.Duration // 0 when the rule gives none
	DailyQuota bool
}

// matchRuleAt returns the first provider error rule of provider that
// matches status, header and body at time now (operator rules first; now
// drives until-midnight rules). Rules fire for any status.
func (c *Classifier) matchRuleAt(provider string, status int, header http.Header, body []byte, now time.Time) (ruleMatch, bool) {
	st := c.load()
	return st.matchRule(lower(strings.TrimSpace(provider)), status, header, hay{s: lower(st.bound(body))}, now)
}

func (st *state) bound(b []byte) string {
	if len(b) > st.set.MaxScan {
		b = b[:st.set.MaxScan]
	}
	return string(b)
}

func (st *state) boundString(s string) string {
	if len(s) > st.set.MaxScan {
		s = s[:st.set.MaxScan]
	}
	return s
}

func (st *state) matchRule(p string, status int, h http.Header, body hay, now time.Time) (ruleMatch, bool) {
	for _, set := range [2][]ProviderRule{st.op[p], st.rules[p]} {
		for i := range set {
			if m, ok := st.match(&set[i], status, h, body, now); ok {
				return m, true
			}
		}
	}
	return ruleMatch{}, false
}

func (st *state) match(r *ProviderRule, status int, h http.Header, body hay, now time.Time) (ruleMatch, bool) {
	if len(r.Statuses) > 0 && !slices.Contains(r.Statuses, status) {
		return ruleMatch{}, false
	}
	if r.literal {
		if !slices.ContainsFunc(r.Any, func(m string) bool { return strings.Contains(body.s, m) }) {
			return ruleMatch{}, false
		}
	} else if len(r.Any) > 0 && !body.any(r.Any, substring) {
		return ruleMatch{}, false
	}
	for _, s := range r.All {
		if !body.has(s, substring) {
			return ruleMatch{}, false
		}
	}
	if len(r.HeaderZero) > 0 {
		ok := false
		for _, name := range r.HeaderZero {
			if strings.TrimSpace(h.Get(name)) == "0" {
				ok = true
				break
			}
		}
		if !ok {
			return ruleMatch{}, false
		}
	}
	if r.HeaderZeroPair != "" && !zeroPair(h.Get(r.HeaderZeroPair)) {
		return ruleMatch{}, false
	}
	m := ruleMatch{ID: r.ID, Reason: r.Reason, Scope: r.Scope, Cooldown: r.Cooldown}
	if r.CooldownFromReset {
		d, ok := resetCountdown(body.s)
		if !ok {
			return ruleMatch{}, false
		}
		m.Cooldown = min(d, st.set.MaxQuotaHint)
	}
	if r.UntilMidnight {
		m.Cooldown = untilMidnight(now)
		m.DailyQuota = true
	}
	return m, true
}

// zeroPair reports whether a "name=value, name=value" list has a value of 0.
func zeroPair(v string) bool {
	for part := range strings.SplitSeq(v, ",") {
		_, val, ok := strings.Cut(part, "=")
		if ok && strings.TrimSpace(val) == "0" {
			return true
		}
	}
	return false
}

// untilMidnight is the time from now to the next local midnight in now's
// location, at most 24 h; 24 h when the result is not in (0, 25 h].
func untilMidnight(now time.Time) time.Duration {
	y, m, d := now.Date()
	next := time.Date(y, m, d+1, 0, 0, 0, 0, now.Location())
	dur := next.Sub(now)
	if dur <= 0 || dur > 25*time.Hour {
		return 24 * time.Hour
	}
	return min(dur, 24*time.Hour)
}
