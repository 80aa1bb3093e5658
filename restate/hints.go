package restate

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxSpan bounds a parsed duration before capping (about 31 years), so
// arithmetic never overflows.
const maxSpan = time.Duration(1e9) * time.Second

// HintAt parses the upstream retry hint of a response at time now: headers
// first, then the JSON body, then the text of the body. Absolute times are
// read relative to now. The result is capped by Config.MaxQuotaHint when it
// is a quota-reset hint (Hint.Quota), else by Config.MaxRateLimitHint; a
// zero Hint means none was found. ClassifyAt reads the same hint into
// Verdict.Hint.
func (c *Classifier) HintAt(h http.Header, body []byte, now time.Time) Hint {
	st := c.load()
	raw := st.bound(body)
	return st.hint(h, raw, hay{s: lower(raw)}, now)
}

func (st *state) hint(h http.Header, raw string, text hay, now time.Time) Hint {
	if d, ok := headerHint(h, now); ok {
		return st.capped(Hint{After: d, Source: hintHeader})
	}
	if d, src, ok := jsonHint(raw, now); ok {
		return st.capped(Hint{After: d, Source: src})
	}
	if d, cp, ok := textHint(text, now); ok {
		return st.capped(Hint{After: d, Source: hintText, Quota: cp == capQuota})
	}
	return Hint{}
}

func (st *state) capped(h Hint) Hint {
	limit := st.set.MaxRateLimitHint
	if h.Quota {
		limit = st.set.MaxQuotaHint
	}
	h.After = min(h.After, limit)
	return h
}

// headerHint reads Retry-After, Retry-After-Ms, x-ratelimit-reset,
// x-ratelimit-reset-requests/-tokens and anthropic-ratelimit-*-reset, in
// that order. Only waits > 0 count.
func headerHint(h http.Header, now time.Time) (time.Duration, bool) {
	if len(h) == 0 {
		return 0, false
	}
	if d, ok := parseRetryAfter(get(h, "Retry-After"), now); ok {
		return d, true
	}
	if v := strings.TrimSpace(get(h, "Retry-After-Ms")); v != "" {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			if d, ok := fromSeconds(f / 1000); ok {
				return d, true
			}
		}
	}
	if d, ok := parseRateLimitReset(get(h, "X-Ratelimit-Reset"), now); ok {
		return d, true
	}
	// The limits that are exhausted decide; otherwise the longest wait.
	var best, bestExhausted time.Duration
	consider := func(reset, remaining string) {
		d, ok := parseResetValue(reset, now)
		if !ok {
			return
		}
		best = max(best, d)
		if strings.TrimSpace(remaining) == "0" {
			bestExhausted = max(bestExhausted, d)
		}
	}
	consider(get(h, "X-Ratelimit-Reset-Requests"), get(h, "X-Ratelimit-Remaining-Requests"))
	consider(get(h, "X-Ratelimit-Reset-Tokens"), get(h, "X-Ratelimit-Remaining-Tokens"))
	const anthropic = "Anthropic-Ratelimit-"
	for k, vs := range h {
		// Canonicalising changes only the case of ASCII letters, so a key
		// without the prefix in some case cannot have it afterwards.
		if len(k) < len(anthropic) || !strings.EqualFold(k[:len(anthropic)], anthropic) {
			continue
		}
		ck := http.CanonicalHeaderKey(k)
		if len(vs) == 0 || !strings.HasPrefix(ck, "Anthropic-Ratelimit-") || !strings.HasSuffix(ck, "-Reset") {
			continue
		}
		base := strings.TrimSuffix(ck, "-Reset")
		consider(vs[0], h.Get(base+"-Remaining"))
	}
	if bestExhausted > 0 {
		return bestExhausted, true
	}
	return best, best > 0
}

// get is h.Get(key) for a key already in canonical form: it skips the
// canonicalisation.
func get(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// parseRetryAfter reads a Retry-After value: seconds (a decimal fraction is
// accepted) or an HTTP-date or RFC 3339 time.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if isNumber(v) {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, false
		}
		return fromSeconds(f)
	}
	if t, err := http.ParseTime(v); err == nil {
		return positive(t.Sub(now))
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return positive(t.Sub(now))
	}
	return 0, false
}

// parseRateLimitReset reads x-ratelimit-reset: an integer is epoch
// milliseconds when ≥ 10¹², epoch seconds when ≥ 10⁹, otherwise relative
// seconds; a duration ("6m0s") or an RFC 3339 time is also understood.
func parseRateLimitReset(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if isNumber(v) {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, false
		}
		switch {
		case f >= 1e12:
			return positive(time.UnixMilli(int64(min(f, 1e17))).Sub(now))
		case f >= 1e9:
			sec, frac := math.Modf(f)
			return positive(time.Unix(int64(sec), int64(frac*1e9)).Sub(now))
		}
		return fromSeconds(f)
	}
	return parseResetValue(v, now)
}

// parseResetValue reads a reset duration ("1s", "6m0s", "20ms", "1m30.5s",
// bare seconds) or an RFC 3339 reset time.
func parseResetValue(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	// A time has its year's four bytes before a '-'; anything else would
	// only build time.Parse's error.
	if len(v) > 4 && v[4] == '-' {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			return positive(t.Sub(now))
		}
	}
	if isNumber(v) {
		return parseRateLimitReset(v, now)
	}
	d, n, ok := parseSpan(strings.ToLower(v), true)
	if !ok || strings.TrimSpace(v[n:]) != "" {
		return 0, false
	}
	return positive(d)
}

func isNumber(v string) bool {
	dot := false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c >= '0' && c <= '9':
		case c == '.' && !dot && i > 0:
			dot = true
		default:
			return false
		}
	}
	return v != "" && v[len(v)-1] != '.'
}

func positive(d time.Duration) (time.Duration, bool) {
	if d <= 0 {
		return 0, false
	}
	return min(d, maxSpan), true
}

func fromSeconds(f float64) (time.Duration, bool) {
	if math.IsNaN(f) || f <= 0 {
		return 0, false
	}
	if f >= maxSpan.Seconds() {
		return maxSpan, true
	}
	return positive(time.Duration(f * float64(time.Second)))
}

// jsonHint reads a JSON body: google.rpc.RetryInfo retryDelay, then
// retryAfter / retry_after (seconds or a future time), then retry_after_ms /
// retryAfterMs, each on the top level or under "error".
func jsonHint(raw string, now time.Time) (time.Duration, HintSource, bool) {
	s := strings.TrimSpace(raw)
	if s == "" || (s[0] != '{' && s[0] != '[') {
		return 0, hintNone, false
	}
	var v any
	if json.Unmarshal([]byte(s), &v) != nil {
		return 0, hintNone, false
	}
	objs := errorObjects(v)
	for _, o := range objs {
		if d, ok := retryInfo(o); ok {
			return d, hintRetryInfo, true
		}
	}
	for _, o := range objs {
		for _, k := range [...]string{"retryAfter", "retry_after"} {
			if d, ok := secondsOrTime(o[k], now); ok {
				return d, hintBody, true
			}
		}
	}
	for _, o := range objs {
		for _, k := range [...]string{"retry_after_ms", "retryAfterMs"} {
			if f, ok := number(o[k]); ok {
				if d, ok := fromSeconds(f / 1000); ok {
					return d, hintBody, true
				}
			}
		}
	}
	return 0, hintNone, false
}

// errorObjects returns the JSON objects that may carry an error: the value
// itself (or its first element) and its "error" member.
func errorObjects(v any) []map[string]any {
	if a, ok := v.([]any); ok && len(a) > 0 {
		v = a[0]
	}
	o, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	out := []map[string]any{o}
	if e, ok := o["error"].(map[string]any); ok {
		out = append(out, e)
	}
	return out
}

func retryInfo(o map[string]any) (time.Duration, bool) {
	details, _ := o["details"].([]any)
	for _, d := range details {
		m, ok := d.(map[string]any)
		if !ok {
			continue
		}
		typ, _ := m["@type"].(string)
		if !strings.Contains(typ, "RetryInfo") {
			continue
		}
		switch rd := m["retryDelay"].(type) {
		case string:
			dur, n, ok := parseSpan(strings.ToLower(strings.TrimSpace(rd)), true)
			if ok && n == len(strings.TrimSpace(rd)) {
				return positive(dur)
			}
		case float64:
			return fromSeconds(rd)
		case map[string]any:
			sec, _ := number(rd["seconds"])
			nanos, _ := number(rd["nanos"])
			return fromSeconds(sec + nanos/1e9)
		}
	}
	return 0, false
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case string:
		if isNumber(strings.TrimSpace(n)) {
			f, err := strconv.ParseFloat(strings.TrimSpace(n), 64)
			return f, err == nil
		}
	}
	return 0, false
}

func secondsOrTime(v any, now time.Time) (time.Duration, bool) {
	if f, ok := number(v); ok {
		return fromSeconds(f)
	}
	if s, ok := v.(string); ok {
		if t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s)); err == nil {
			return positive(t.Sub(now))
		}
	}
	return 0, false
}

// textPhrase is one hint phrase of free text.
type textPhrase struct {
	phrase   string
	rel      bool    // a relative duration may follow
	unitless bool    // a bare number means seconds
	relCap   hintCap // cap of a relative duration
	abs      bool    // an absolute time may follow (quota cap)
}

var textPhrases = [...]textPhrase{
	{phrase: "retry in", rel: true, unitless: true, relCap: capRateLimit},
	{phrase: "try again in", rel: true, unitless: true, relCap: capRateLimit},
	{phrase: "retry after", rel: true, unitless: true, relCap: capRateLimit, abs: true},
	{phrase: "try again at", abs: true},
	{phrase: "wait until", abs: true},
	{phrase: "available at", abs: true},
	{phrase: "resets at", abs: true},
	{phrase: "reset at", abs: true},
	{phrase: "resets after", rel: true, relCap: capQuota},
	{phrase: "reset after", rel: true, relCap: capQuota},
	{phrase: "resets in", rel: true, relCap: capQuota},
	{phrase: "reset in", rel: true, relCap: capQuota},
}

// textHint reads a hint from lower-cased text.
func textHint(h hay, now time.Time) (time.Duration, hintCap, bool) {
	text := h.s
	for _, p := range textPhrases {
		if h.p != nil && !h.p.mayHold(p.phrase) {
			continue // not in the text
		}
		from := 0
		for from < len(text) {
			i := strings.Index(text[from:], p.phrase)
			if i < 0 {
				break
			}
			after := text[from+i+len(p.phrase):]
			from += i + len(p.phrase)
			if p.abs {
				if t, ok := parseAbsolute(after, now); ok {
					if d, ok := positive(t.Sub(now)); ok {
						return d, capQuota, true
					}
					continue
				}
			}
			if p.rel {
				if d, _, ok := parseSpan(after, p.unitless); ok {
					if d, ok := positive(d); ok {
						return d, p.relCap, true
					}
				}
			}
		}
	}
	return 0, capNone, false
}

// resetCountdown reads a reset countdown from lower-cased text: "resets in
// N unit" or "reset in N unit", where "reset" starts a word, N is an
// integer > 0 and unit is day(s), hour(s), minute(s) or second(s) as a
// whole word, separated by white space. The first occurrence that has this
// form counts. Any other form gives no value: "resets in 2 weeks", "resets
// in 1.5h", "resets in 3d" and "resets in 0 days" are refused. The result
// is at most maxSpan; callers apply their cap.
//
// It is stricter than the general duration reader of retry hints
// (parseSpan), on purpose: its value becomes a fixed cooldown of many days.
func resetCountdown(text string) (time.Duration, bool) {
	for from := 0; from < len(text); {
		i := find(text, "reset", from, len(text), substring)
		if i < 0 {
			return 0, false
		}
		from = i + len("reset")
		if i > 0 && isWordRune(lastRune(text[:i])) { // "preset" does not count
			continue
		}
		if d, ok := countdownAt(text, from); ok {
			return d, true
		}
	}
	return 0, false
}

// countdownUnits are the units of resetCountdown.
var countdownUnits = [...]struct {
	name string
	unit time.Duration
}{
	{"days", 24 * time.Hour}, {"day", 24 * time.Hour},
	{"hours", time.Hour}, {"hour", time.Hour},
	{"minutes", time.Minute}, {"minute", time.Minute},
	{"seconds", time.Second}, {"second", time.Second},
}

// countdownAt reads `s? \s+ in \s+ N \s+ unit` at text[i:], just after a
// "reset".
func countdownAt(text string, i int) (time.Duration, bool) {
	if i < len(text) && text[i] == 's' {
		i++
	}
	j := skipWhite(text, i)
	if j == i || !strings.HasPrefix(text[j:], "in") {
		return 0, false
	}
	i = j + len("in")
	j = skipWhite(text, i)
	if j == i {
		return 0, false
	}
	var n int64
	k := j
	for k < len(text) && text[k] >= '0' && text[k] <= '9' {
		if n < 1e12 { // far beyond maxSpan in any unit; stop growing
			n = n*10 + int64(text[k]-'0')
		}
		k++
	}
	if k == j || n <= 0 {
		return 0, false
	}
	i = skipWhite(text, k)
	if i == k {
		return 0, false
	}
	for _, u := range countdownUnits {
		end := i + len(u.name)
		if strings.HasPrefix(text[i:], u.name) && bounded(text, i, end) {
			if n >= int64(maxSpan/u.unit) {
				return maxSpan, true
			}
			return time.Duration(n) * u.unit, true
		}
	}
	return 0, false
}

// skipWhite skips ASCII white space from i.
func skipWhite(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r' || s[i] == '\f' || s[i] == '\v') {
		i++
	}
	return i
}

var units = map[string]time.Duration{
	"ms": time.Millisecond, "msec": time.Millisecond, "msecs": time.Millisecond,
	"millisecond": time.Millisecond, "milliseconds": time.Millisecond,
	"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hrs": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
	"w": 7 * 24 * time.Hour, "week": 7 * 24 * time.Hour, "weeks": 7 * 24 * time.Hour,
}

// parseSpan parses a duration at the start of lower-cased s, after optional
// spaces: one or more "<number><unit>" parts ("1h2m3s", "26.5s", "3 days",
// "2 hours and 5 minutes", "1500ms"). With unitless, a single bare number
// means seconds. It returns the duration and the bytes consumed.
func parseSpan(s string, unitless bool) (time.Duration, int, bool) {
	i := skipSpace(s, 0)
	var total float64 // seconds
	parts, end := 0, 0
	for {
		j := i
		for j < len(s) && j-i < 20 && (s[j] >= '0' && s[j] <= '9' || s[j] == '.' && j > i) {
			j++
		}
		if j == i {
			break
		}
		num, err := strconv.ParseFloat(strings.TrimSuffix(s[i:j], "."), 64)
		if err != nil {
			break
		}
		k := skipSpace(s, j)
		w := k
		for w < len(s) && s[w] >= 'a' && s[w] <= 'z' {
			w++
		}
		unit, ok := units[s[k:w]]
		if !ok {
			if parts == 0 && unitless && (j == len(s) || !strings.ContainsRune("-:/", rune(s[j]))) && (w == k) {
				d, ok := fromSeconds(num)
				return d, j, ok
			}
			break
		}
		total += num * unit.Seconds()
		parts++
		end = w
		if total >= maxSpan.Seconds() {
			return maxSpan, end, true
		}
		// Continue with "1h 2m", "1h, 2m", "1 hour and 2 minutes".
		n := skipSpace(s, w)
		if n < len(s) && s[n] == ',' {
			n = skipSpace(s, n+1)
		}
		if strings.HasPrefix(s[n:], "and ") {
			n = skipSpace(s, n+4)
		}
		i = n
	}
	if parts == 0 {
		return 0, 0, false
	}
	d, ok := fromSeconds(total)
	return d, end, ok
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '~') {
		i++
	}
	return i
}

// parseAbsolute reads a time at the start of lower-cased s: RFC 3339
// ("2026-01-02t03:04:05z"), "2026-01-02 03:04:05" (UTC) or
// "01-02 03:04:05 utc" (this year, or the next when already past).
func parseAbsolute(s string, now time.Time) (time.Time, bool) {
	s = s[skipSpace(s, 0):]
	j := 0
	for j < len(s) && j < 40 && strings.IndexByte("0123456789-:.+tz", s[j]) >= 0 {
		j++
	}
	if j >= 20 {
		tok := strings.NewReplacer("t", "T", "z", "Z").Replace(s[:j])
		tok = strings.TrimRight(tok, ".")
		if t, err := time.Parse(time.RFC3339Nano, tok); err == nil {
			return t, true
		}
	}
	if len(s) >= 19 {
		if t, err := time.ParseInLocation("2006-01-02 15:04:05", s[:19], time.UTC); err == nil {
			return t, true
		}
	}
	if len(s) >= 18 && s[14:18] == " utc" {
		if t, err := time.ParseInLocation("01-02 15:04:05", s[:14], time.UTC); err == nil {
			t = t.AddDate(now.UTC().Year()-t.Year(), 0, 0)
			if !t.After(now) {
				t = t.AddDate(1, 0, 0)
			}
			return t, true
		}
	}
	return time.Time{}, false
}
