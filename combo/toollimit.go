package combo

import (
	"bytes"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Defaults and ranges of [ToolLimitConfig].
const (
	defaultToolLimitTTL        = time.Hour
	defaultToolLimitMaxEntries = 10000

	minToolLimitTTL   = time.Minute
	maxToolLimitTTL   = 7 * 24 * time.Hour
	maxToolLimitCap   = 1_000_000
	maxToolLimitValue = 100_000
	toolLimitScan     = 8 << 10
)

// ToolLimitConfig configures [ToolLimits]. The zero value means the
// defaults.
type ToolLimitConfig struct {
	// TTL is how long a learned limit is remembered. Default 1 h; Normalize
	// clamps to [1 min, 7 days].
	TTL time.Duration
	// MaxEntries bounds the remembered provider+model pairs. Default 10000;
	// Normalize clamps to [1, 1000000]. When full, expired entries are
	// pruned and then the entry closest to expiry is dropped.
	MaxEntries int
	// OnLearn, if set, is called with every limit that is stored, outside
	// the lock.
	OnLearn func(ToolLimit)
}

// Normalize returns c with defaults filled in and values clamped.
func (c ToolLimitConfig) Normalize() ToolLimitConfig {
	switch {
	case c.TTL <= 0:
		c.TTL = defaultToolLimitTTL
	case c.TTL < minToolLimitTTL:
		c.TTL = minToolLimitTTL
	case c.TTL > maxToolLimitTTL:
		c.TTL = maxToolLimitTTL
	}
	if c.MaxEntries <= 0 {
		c.MaxEntries = defaultToolLimitMaxEntries
	}
	c.MaxEntries = min(c.MaxEntries, maxToolLimitCap)
	return c
}

// ToolLimits remembers, per provider and model, how many tools an upstream
// accepts, learned from its refusals. A router with ToolLimits excludes a
// target whose known limit is below the request's tool count (reason
// tool_limit) and learns from every refusal it sees. Safe for concurrent
// use; expired entries are dropped lazily.
type ToolLimits struct {
	cfg ToolLimitConfig
	mu  sync.RWMutex
	m   map[toolKey]toolEntry
}

type toolKey struct{ provider, model string }

type toolEntry struct {
	limit int
	until time.Time
}

// ToolLimit is one remembered limit, as given to [ToolLimitConfig.OnLearn].
type ToolLimit struct {
	Provider string    `json:"provider"`
	Model    string    `json:"model"`
	Limit    int       `json:"limit"`
	Until    time.Time `json:"until"`
}

// NewToolLimits returns an empty tool-limit memory with cfg (normalised).
func NewToolLimits(cfg ToolLimitConfig) *ToolLimits {
	return &ToolLimits{cfg: cfg.Normalize(), m: make(map[toolKey]toolEntry)}
}

// LearnAt remembers that provider's model accepts at most limit tools, until
// now plus the TTL. A lower limit replaces a higher one at once; a higher
// one replaces an expired entry only, so a later, looser refusal cannot
// undo a strict one before it expires. Negative limits are ignored.
func (l *ToolLimits) LearnAt(provider, model string, limit int, now time.Time) {
	if limit < 0 {
		return
	}
	k := toolKey{provider, model}
	until := now.Add(l.cfg.TTL)
	l.mu.Lock()
	if e, ok := l.m[k]; ok && e.until.After(now) && e.limit <= limit {
		l.mu.Unlock()
		return
	}
	if _, ok := l.m[k]; !ok && len(l.m) >= l.cfg.MaxEntries {
		l.pruneLocked(now)
	}
	l.m[k] = toolEntry{limit: limit, until: until}
	l.mu.Unlock()
	if l.cfg.OnLearn != nil {
		l.cfg.OnLearn(ToolLimit{Provider: provider, Model: model, Limit: limit, Until: until})
	}
}

// pruneLocked drops expired entries and, if still full, the entry closest
// to expiry.
func (l *ToolLimits) pruneLocked(now time.Time) {
	for k, e := range l.m {
		if !e.until.After(now) {
			delete(l.m, k)
		}
	}
	for len(l.m) >= l.cfg.MaxEntries {
		var victim toolKey
		var first time.Time
		found := false
		for k, e := range l.m {
			if !found || e.until.Before(first) {
				victim, first, found = k, e.until, true
			}
		}
		delete(l.m, victim)
	}
}

// LimitAt returns the remembered limit of provider's model, if one is known
// and not expired at now. It allocates nothing.
func (l *ToolLimits) LimitAt(provider, model string, now time.Time) (int, bool) {
	l.mu.RLock()
	e, ok := l.m[toolKey{provider, model}]
	l.mu.RUnlock()
	if !ok || !e.until.After(now) {
		return 0, false
	}
	return e.limit, true
}

// Allows reports whether a request with tools tools may go to provider's
// model at now. It allocates nothing.
func (l *ToolLimits) Allows(provider, model string, tools int, now time.Time) bool {
	if tools <= 0 {
		return true
	}
	lim, ok := l.LimitAt(provider, model, now)
	return !ok || tools <= lim
}

// forget drops the remembered limit of provider's model.
func (l *ToolLimits) forget(provider, model string) {
	l.mu.Lock()
	delete(l.m, toolKey{provider, model})
	l.mu.Unlock()
}

// snapshotAt lists the limits in force at now, sorted by provider and
// model.
func (l *ToolLimits) snapshotAt(now time.Time) []ToolLimit {
	l.mu.RLock()
	out := make([]ToolLimit, 0, len(l.m))
	for k, e := range l.m {
		if e.until.After(now) {
			out = append(out, ToolLimit{Provider: k.provider, Model: k.model, Limit: e.limit, Until: e.until})
		}
	}
	l.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Provider != out[j].Provider {
			return out[i].Provider < out[j].Provider
		}
		return out[i].Model < out[j].Model
	})
	return out
}

var (
	// toolTriggers say, on their own, that the request had too many tools.
	toolTriggers = [][]byte{
		[]byte("too many tools"),
		[]byte("too many functions"),
		[]byte("number of tools"),
		[]byte("tool count"),
		[]byte("tools count"),
		[]byte("tools limit"),
		[]byte("tool limit"),
		[]byte("tools exceed"),
		[]byte("functions exceed"),
	}
	// toolCountRe matches "maximum of 128 tools", "at most 64 functions",
	// "128 tools allowed" and similar.
	toolCountRe = regexp.MustCompile(`(?:maximum of|max of|at most|up to|no more than|limit of|limit is|maximum is|max is|supports|allows|allowed)\s+(\d{1,9})\s+(?:tools|functions|tool definitions|function declarations)`)
	// toolArrayRe matches the array-length refusal of a "tools" parameter:
	// `'tools': array too long. Expected an array with maximum length 128`.
	toolArrayRe = regexp.MustCompile(`\btools\W{0,8}(?:array )?(?:is )?too long`)
	// toolNumberRe finds the limit in a refusal already known to be about
	// tools.
	toolNumberRe = regexp.MustCompile(`(?:maximum length|maximum of|max of|at most|up to|no more than|limit of|limit is|limit:|maximum is|max is|maximum:|max:|maximum|max|limit)\s*(?:is\s*)?(\d{1,9})`)
)

// parseToolLimit reports whether an upstream answer refuses a request for
// carrying too many tools, and the limit it names (-1 when it names none).
// It understands the usual wordings: "maximum of N tools", "too many
// tools", "'tools': array too long … maximum length N", "tool count
// exceeds the limit of N", and similar. Only client-error statuses count
// (4xx other than 401, 402, 403, 404 and 429); a status of 0 means unknown
// and is accepted. Only the first 8 KiB of body are read.
func parseToolLimit(status int, body []byte) (limit int, ok bool) {
	if status != 0 && (status < 400 || status > 499 || status == 401 || status == 402 ||
		status == 403 || status == 404 || status == 429) {
		return 0, false
	}
	if len(body) > toolLimitScan {
		body = body[:toolLimitScan]
	}
	text := bytes.ToLower(body)
	if !bytes.Contains(text, []byte("tool")) && !bytes.Contains(text, []byte("function")) {
		return 0, false
	}
	if m := toolCountRe.FindSubmatch(text); m != nil {
		return parseLimit(m[1]), true
	}
	hit := toolArrayRe.Match(text)
	for _, t := range toolTriggers {
		if hit {
			break
		}
		hit = bytes.Contains(text, t)
	}
	if !hit {
		return 0, false
	}
	if m := toolNumberRe.FindSubmatch(text); m != nil {
		return parseLimit(m[1]), true
	}
	return -1, true
}

func parseLimit(b []byte) int {
	n, err := strconv.Atoi(string(b))
	if err != nil || n > maxToolLimitValue {
		return -1
	}
	return n
}

// learnToolLimit records the limit an upstream refusal names for t and
// reports whether the failure was a tool-limit refusal. A refusal that
// names no usable limit is taken to allow one tool fewer than the request
// carried.
func (r *Router) learnToolLimit(t *Target, tools, status int, body []byte, now time.Time) bool {
	tl := r.cfg.ToolLimits
	if tl == nil || tools <= 0 || len(body) == 0 {
		return false
	}
	lim, ok := parseToolLimit(status, body)
	if !ok {
		return false
	}
	if lim < 0 || lim >= tools {
		lim = tools - 1
	}
	tl.LearnAt(t.Provider, t.Model, lim, now)
	return true
}
