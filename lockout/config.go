package lockout

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/routeguard/routeguard/internal/config"
)

// Defaults and ranges of the Config fields; the field docs give them.
const (
	defaultBaseCooldown    = 120 * time.Second
	minBaseCooldown        = 5 * time.Second
	maxBaseCooldown        = 10 * time.Minute
	defaultMaxCooldown     = 30 * time.Minute
	minMaxCooldown         = 5 * time.Second
	maxMaxCooldown         = time.Hour
	defaultMaxBackoffSteps = 10
	maxMaxBackoffSteps     = 20
	defaultResetAfter      = 30 * time.Minute
	maxEscalationWindow    = 24 * time.Hour
	defaultMaxEntries      = 100_000
	minMaxEntries          = 16
	maxMaxEntries          = 10_000_000
	minErrorCode           = 100
	maxErrorCode           = 599
	defaultSweepInterval   = 15 * time.Second
	quotaDayGuard          = 24 * time.Hour
	evictLowWaterFraction  = 8 // evict down to cap − cap/8
)

// defaultErrorCodes returns the statuses that count as model-level failures
// when Config.ErrorCodes is empty.
func defaultErrorCodes() []int { return []int{403, 404, 429, 502, 503, 504} }

// Config configures a [Lockout]. The zero value means the defaults listed
// next to each field, with lockout switched off.
type Config struct {
	// Enabled switches model lockout on. Default false: while it is false
	// nothing is recorded or locked and every model reads as unlocked.
	Enabled bool

	// ErrorCodes lists the upstream statuses that may lock a model; a status
	// not in the list never does. Entries outside [100, 599] and repeats are
	// dropped; an empty list (or one with no valid entry) means the default
	// 403, 404, 429, 502, 503, 504.
	ErrorCodes []int

	// BaseCooldown is the lock length of a first failure. Zero means 120 s;
	// other values, negative ones included, are clamped to [5 s, 10 min].
	BaseCooldown time.Duration

	// MaxCooldown caps every computed lock length. Zero means 30 min; other
	// values, negative ones included, are clamped to [5 s, 1 h] and then
	// raised to at least BaseCooldown.
	MaxCooldown time.Duration

	// MaxBackoffSteps caps the exponent of the escalation
	// BaseCooldown·2^min(count−1, MaxBackoffSteps). Nil means 10; a set
	// value is clamped to [0, 20], and 0 means no escalation (every failure
	// locks for BaseCooldown). Write new(0) for that.
	MaxBackoffSteps *int

	// FixedCooldown turns the exponential escalation off, so every failure
	// locks for BaseCooldown. Default false (escalation on).
	FixedCooldown bool

	// EscalationWindow decides whether a failure follows the previous one:
	// it does when it arrives within EscalationWindow plus the previous
	// cooldown after the previous failure, and then the failure count rises;
	// otherwise the count starts again at 1. Zero (or negative) means each
	// failure's Failure.ResetAfter (the breaker profile's reset time), or
	// 30 min when that is zero too. Other values are capped at 24 h.
	EscalationWindow time.Duration

	// MaxEntries bounds the number of tracked keys (locks and failure
	// records together). Zero means 100 000; other values, negative ones
	// included, are clamped to [16, 10 000 000]. When a write passes the
	// bound, expired entries are pruned and then the entries closest to
	// expiry are evicted, down to seven eighths of the bound; the entry just
	// written is never evicted.
	MaxEntries int

	// Families maps a canonical provider id to its quota-family function.
	// Nil means the built-in table: codex uses [CodexFamily]. A non-nil map
	// replaces the built-in table; providers without an entry use the model
	// itself as the family.
	Families map[string]FamilyFunc

	// Aliases maps provider aliases to canonical ids, applied to every
	// provider argument. Nil means the built-in table ("cx" → "codex"); an
	// empty map means no aliases.
	Aliases map[string]string

	// Location is the time zone of "local midnight", the end of a
	// quota_exhausted lock that has no exact length. Nil means time.Local.
	Location *time.Location

	// OnChange, when not nil, is called with every lock that is created,
	// extended, cleared, removed by decay or evicted; see [Event].
	OnChange func(Event)
}

// Normalize returns c with the defaults of the numeric settings filled in
// and every one clamped into its range. It never modifies c: the copy has
// its own ErrorCodes slice and MaxBackoffSteps pointer. Families, Aliases,
// Location and OnChange are returned as given; nil keeps its documented
// meaning. Normalize is idempotent, and [New] calls it.
func (c Config) Normalize() Config {
	n := c
	n.ErrorCodes = normalizeCodes(c.ErrorCodes)

	n.BaseCooldown = config.Dur(c.BaseCooldown, defaultBaseCooldown, minBaseCooldown, maxBaseCooldown)
	if c.BaseCooldown < 0 {
		n.BaseCooldown = minBaseCooldown
	}
	n.MaxCooldown = config.Dur(c.MaxCooldown, defaultMaxCooldown, minMaxCooldown, maxMaxCooldown)
	if c.MaxCooldown < 0 {
		n.MaxCooldown = minMaxCooldown
	}
	n.MaxCooldown = max(n.MaxCooldown, n.BaseCooldown)

	n.MaxBackoffSteps = config.ClampIntPtr(c.MaxBackoffSteps, 0, maxMaxBackoffSteps)
	if n.MaxBackoffSteps == nil {
		n.MaxBackoffSteps = new(defaultMaxBackoffSteps)
	}

	n.EscalationWindow = min(max(c.EscalationWindow, 0), maxEscalationWindow)

	n.MaxEntries = config.Int(c.MaxEntries, defaultMaxEntries, minMaxEntries, maxMaxEntries)
	if c.MaxEntries < 0 {
		n.MaxEntries = minMaxEntries
	}
	return n
}

func normalizeCodes(in []int) []int {
	out := make([]int, 0, len(in))
	for _, c := range in {
		if c >= minErrorCode && c <= maxErrorCode && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return defaultErrorCodes()
	}
	return out
}

// Environment variables read by FromEnv.
const (
	envEnabled          = "MODEL_LOCKOUT_ENABLED"
	envErrorCodes       = "MODEL_LOCKOUT_ERROR_CODES"
	envBaseCooldownMs   = "MODEL_LOCKOUT_BASE_COOLDOWN_MS"
	envMaxCooldownMs    = "MODEL_LOCKOUT_MAX_COOLDOWN_MS"
	envMaxBackoffSteps  = "MODEL_LOCKOUT_MAX_BACKOFF_STEPS"
	envExponential      = "MODEL_LOCKOUT_USE_EXPONENTIAL_BACKOFF"
	envEscalationWindow = "MODEL_LOCKOUT_ESCALATION_WINDOW_MS"
	envEvictionCap      = "MODEL_LOCKOUT_EVICTION_CAP"
)

var (
	errNotCode = errors.New("not a status code in [100, 599]")
	errNoCode  = errors.New("no valid status code; using the default list")
)

// FromEnv reads a Config from environment variables through lookup (pass
// os.LookupEnv in production, a map lookup in tests). Only the variables
// that are set and not blank are filled in; everything else is left zero,
// so the result can be merged with other settings before [Config.Normalize]
// or [New] fills in the defaults. The variables:
//
//   - MODEL_LOCKOUT_ENABLED: a switch (1, true, yes, on / 0, false, no, off)
//     for Enabled.
//   - MODEL_LOCKOUT_USE_EXPONENTIAL_BACKOFF: a switch; off sets
//     FixedCooldown.
//   - MODEL_LOCKOUT_ERROR_CODES: a comma list of whole numbers in
//     [100, 599] for ErrorCodes; bad entries are dropped.
//   - MODEL_LOCKOUT_BASE_COOLDOWN_MS, MODEL_LOCKOUT_MAX_COOLDOWN_MS: whole
//     milliseconds; 0 asks for the minimum, 5 s.
//   - MODEL_LOCKOUT_ESCALATION_WINDOW_MS: whole milliseconds; 0 means the
//     breaker profile's reset time.
//   - MODEL_LOCKOUT_MAX_BACKOFF_STEPS: a whole number; 0 means no
//     escalation.
//   - MODEL_LOCKOUT_EVICTION_CAP: a whole number for MaxEntries.
//
// A value that cannot be read leaves its field unset and is reported: the
// error joins one [*Error] with code [CodeInvalidConfig] per bad value,
// each naming the variable in Field.
func FromEnv(lookup func(string) (string, bool)) (Config, error) {
	var c Config
	env := config.Env{Lookup: lookup, Refuse: func(name, value string, reason error) error {
		return invalidConfig(name, value, reason.Error())
	}}
	env.Switch(envEnabled, &c.Enabled)
	var exponential *bool
	env.SwitchOpt(envExponential, &exponential)
	if exponential != nil {
		c.FixedCooldown = !*exponential
	}
	var codes []string
	env.List(envErrorCodes, &codes)
	for _, s := range codes {
		n, err := config.ParseInt(s)
		switch {
		case err != nil:
			env.Refused(envErrorCodes, s, err)
		case n < minErrorCode || n > maxErrorCode:
			env.Refused(envErrorCodes, s, errNotCode)
		default:
			c.ErrorCodes = append(c.ErrorCodes, n)
		}
	}
	if len(codes) > 0 && len(c.ErrorCodes) == 0 {
		v, _ := env.Raw(envErrorCodes)
		env.Refused(envErrorCodes, v, errNoCode)
	}
	millisAtLeast := func(name string, dst *time.Duration, lo time.Duration) {
		var d *time.Duration
		env.MillisOpt(name, &d)
		switch {
		case d == nil:
		case *d == 0:
			*dst = lo // zero in the struct means the default
		default:
			*dst = *d
		}
	}
	millisAtLeast(envBaseCooldownMs, &c.BaseCooldown, minBaseCooldown)
	millisAtLeast(envMaxCooldownMs, &c.MaxCooldown, minMaxCooldown)
	env.Millis(envEscalationWindow, &c.EscalationWindow)
	env.IntOpt(envMaxBackoffSteps, &c.MaxBackoffSteps)
	env.Int(envEvictionCap, &c.MaxEntries)
	return c, env.Err()
}

// codeSet is a bitset of status codes.
type codeSet [(maxErrorCode + 64) / 64]uint64

func (s *codeSet) has(status int) bool {
	return status >= 0 && status <= maxErrorCode && s[status/64]&(1<<(status%64)) != 0
}

type family struct {
	provider string
	fn       FamilyFunc
}

type alias struct{ from, to string }

// conf is a normalized Config with its tables prepared for lookups. It is
// never changed once stored.
type conf struct {
	Config
	codes    codeSet
	steps    int
	families []family // sorted by provider
	aliases  []alias  // sorted by alias
	loc      *time.Location
}

func newConf(c Config) *conf {
	n := &conf{Config: c.Normalize()}
	n.steps = *n.MaxBackoffSteps
	for _, code := range n.ErrorCodes {
		n.codes[code/64] |= 1 << (code % 64)
	}
	fams := c.Families
	if fams == nil {
		fams = map[string]FamilyFunc{"codex": CodexFamily}
	}
	for p, fn := range fams {
		if fn != nil {
			n.families = append(n.families, family{p, fn})
		}
	}
	aliases := c.Aliases
	if aliases == nil {
		aliases = map[string]string{"cx": "codex"}
	}
	for from, to := range aliases {
		n.aliases = append(n.aliases, alias{from, to})
	}
	slices.SortFunc(n.families, func(a, b family) int { return strings.Compare(a.provider, b.provider) })
	slices.SortFunc(n.aliases, func(a, b alias) int { return strings.Compare(a.from, b.from) })
	n.loc = c.Location
	if n.loc == nil {
		n.loc = time.Local
	}
	return n
}

// window is the escalation window of e, minus e's last cooldown.
func (c *conf) window(e *entry) time.Duration {
	if c.EscalationWindow > 0 {
		return c.EscalationWindow
	}
	return e.resetAfter
}

// canonical maps a provider alias to its canonical id. The alias table is
// scanned linearly: it is short, and a length check rejects most entries.
func (c *conf) canonical(provider string) string {
	for i := range c.aliases {
		if c.aliases[i].from == provider {
			return c.aliases[i].to
		}
	}
	return provider
}

// family returns the quota family of model on provider, which is model
// itself for providers without a family function.
func (c *conf) family(provider, model string) string {
	if fn := c.familyFunc(provider); fn != nil {
		return fn(model)
	}
	return model
}

// familyFunc returns provider's quota-family function, or nil when its
// models are their own families.
func (c *conf) familyFunc(provider string) FamilyFunc {
	for i := range c.families {
		if c.families[i].provider == provider {
			return c.families[i].fn
		}
	}
	return nil
}
