package gw

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/admin"
)

// DefaultListen is the address used when neither the config nor a flag
// gives one.
const DefaultListen = "127.0.0.1:8080"

// Config is the gateway's configuration, written as JSON or YAML (one
// schema for both, see config.schema.json). Durations are integer
// milliseconds (fields ending in Ms); a zero or absent field means the
// library's default, except where a field says that 0 is a value (there an
// absent field or null means the default and an explicit 0 is used as 0).
//
// Any string may reference environment variables as ${NAME} (write $${
// for a literal "${"); they are resolved when the file is loaded, a
// missing variable refuses the configuration, and resolved values never
// appear in the gateway's logs or answers.
type Config struct {
	// Listen is the address to listen on; the -listen flag overrides it.
	// A reload keeps the address the gateway started with.
	Listen string `json:"listen"`
	// AdminToken is the bearer token of the admin API.
	AdminToken string `json:"adminToken"`
	// APIKeys are the client keys; with none, chat requests need no key.
	APIKeys []APIKey `json:"apiKeys"`
	// Providers are the upstreams, at least one.
	Providers []Provider `json:"providers"`
	// Combos are the named routes a request's model can name.
	Combos []Combo `json:"combos"`
	// Resilience configures the layers. A reload applies its
	// providerErrorRules; the other settings take effect at a restart.
	Resilience Resilience `json:"resilience"`
	// Server bounds what one client can make the gateway hold. A reload
	// keeps the settings the gateway started with.
	Server ServerConfig `json:"server"`
	// State is where the gateway keeps the state that survives a restart
	// (see StateConfig); only a restart applies a change of it.
	State StateConfig `json:"state"`
	// Redis is the Redis that replicas share leases, connection caps,
	// breakers, cooldowns, lockouts and pins on (see RedisConfig); only a
	// restart applies a change of it.
	Redis RedisConfig `json:"redis"`
	// Metrics is where the Prometheus metrics are served (see
	// MetricsConfig); only a restart applies a change of it.
	Metrics MetricsConfig `json:"metrics"`

	secrets []string // resolved environment values, redacted from output
}

// APIKey is a client key. With at least one key configured, every chat
// request must carry one as a bearer token. A key with the lease:exclusive
// scope is managed: it must name its allowed connections and its requests
// must present a lease.
type APIKey struct {
	ID                 string   `json:"id"`
	Key                string   `json:"key"`
	Scopes             []string `json:"scopes"`
	AllowedConnections []string `json:"allowedConnections"`
	// MaxInFlight caps the key's requests in flight at once (streams
	// count until they end); a request over the cap is answered 429
	// client_in_flight_limit with Retry-After: 1. 0 or absent means no
	// cap.
	MaxInFlight int `json:"maxInFlight"`
}

// Provider is one upstream: an OpenAI-compatible base URL and the
// connections (API keys) that reach it.
type Provider struct {
	ID          string       `json:"id"`
	Class       string       `json:"class"` // apikey (default), oauth or local
	BaseURL     string       `json:"baseURL"`
	Connections []Connection `json:"connections"`
	// Models lists the models reachable as "provider/model"; empty means
	// any model.
	Models []string `json:"models"`
	// Headers are sent with every request to the provider (for example
	// "anthropic-version"). They cannot set Authorization (each
	// connection's apiKey is sent as its bearer token), Content-Type,
	// Host or hop-by-hop headers.
	Headers map[string]string `json:"headers"`
}

// Connection is one credential of a provider. Its id is unique across all
// providers.
type Connection struct {
	ID            string `json:"id"`
	Name          string `json:"name"`
	APIKey        string `json:"apiKey"`
	MaxConcurrent int    `json:"maxConcurrent"`
}

// Combo is a named list of targets served by one strategy. The strategy
// is an ordering strategy of package combo ("priority" when empty,
// "round-robin", "weighted", ...), StrategyFusion or StrategyPipeline.
type Combo struct {
	Name string `json:"name"`
	// Strategy names the ordering strategy, or "fusion" (the targets are
	// a panel asked in parallel, see Fusion) or "pipeline" (see Steps).
	Strategy string `json:"strategy"`
	// Targets are the combo's targets in declared order; for a fusion,
	// the panel (at least two). A pipeline has none.
	Targets  []Target      `json:"targets"`
	Settings ComboSettings `json:"settings"`
	// Fusion tunes a fusion combo; only with strategy "fusion".
	Fusion *FusionConfig `json:"fusion,omitempty"`
	// Steps are the steps of a pipeline combo, in order, at least one:
	// each names a configured combo with an ordering strategy, or a
	// provider/model. Each step's answer is the next step's input; only
	// the last answer is returned. Only with strategy "pipeline".
	Steps []string `json:"steps,omitempty"`
}

// Strategies of a Combo that are compositions rather than orderings.
const (
	StrategyFusion   = "fusion"
	StrategyPipeline = "pipeline"
)

// FusionConfig tunes a fusion combo: the panel (the combo's targets) is
// asked in parallel, without streaming and without tools; once MinPanel
// members have answered, the others get GraceMs more; HardCapMs bounds the
// whole panel. One answer is returned as it is; two or more go to the
// judge, which synthesises one answer. A request with tools (and a
// tool_choice other than "none") goes to the judge alone. No answer at
// all is a 503 fusion_no_answers.
type FusionConfig struct {
	// Judge is the target that synthesises the panel's answers and serves
	// requests with tools; absent means the first panel target.
	Judge *Target `json:"judge"`
	// MinPanel is the quorum that starts the grace period. 0 or absent
	// means 2; clamped to 2..the panel's size.
	MinPanel int `json:"minPanel"`
	// GraceMs is how long stragglers may still answer once the quorum is
	// reached. 0 or absent means 8000; at most 600000.
	GraceMs int `json:"graceMs"`
	// HardCapMs bounds the whole panel. 0 or absent means 90000; clamped
	// to 1000..1800000.
	HardCapMs int `json:"hardCapMs"`
}

// Target is a model of a provider; without a connection it may use any
// connection of the provider, in declared order.
type Target struct {
	Provider   string  `json:"provider"`
	Model      string  `json:"model"`
	Connection string  `json:"connection"`
	Weight     float64 `json:"weight"`
	Priority   int     `json:"priority"`
}

// ComboSettings are the per-combo knobs of combo.Settings.
type ComboSettings struct {
	MaxAttempts     int `json:"maxAttempts"`
	TargetTimeoutMs int `json:"targetTimeoutMs"`
	StickyLimit     int `json:"stickyLimit"`
	// StreamRecovery, when present, replaces resilience.streamRecovery
	// for this combo.
	StreamRecovery *StreamRecoveryConfig `json:"streamRecovery,omitempty"`
}

// StreamRecoveryConfig is the opt-in recovery of streamed answers (see
// combo.StreamRecovery); absent or all false means off.
type StreamRecoveryConfig struct {
	// Early reopens a stream that fails before the client got a byte (the
	// readiness or idle timeout, an empty stream, no useful output, a read
	// error) once on the same connection before moving on to the next
	// target.
	Early bool `json:"early"`
	// MidStream continues a plain-text chat completion stream that breaks
	// off after the client got its first bytes, with no tool call or
	// reasoning block in flight: the next target is asked to continue the
	// text already sent, and only what it adds is streamed on, in the
	// original stream's framing, ending with one data: [DONE].
	MidStream bool `json:"midStream"`
	// MaxContinuations bounds the continuations of one answer: 0 or
	// absent means 1, at most 5.
	MaxContinuations int `json:"maxContinuations"`
}

// validate refuses a value out of range; f is the setting's path.
func (r *StreamRecoveryConfig) validate(f string) error {
	if r == nil || (r.MaxContinuations >= 0 && r.MaxContinuations <= 5) {
		return nil
	}
	return ConfigErrors{{Field: f + ".maxContinuations",
		Problem: fmt.Sprintf("must be 0..5 (0 or absent means 1), got %d", r.MaxContinuations)}}
}

// Resilience configures the layers.
type Resilience struct {
	Breaker              BreakerConfig      `json:"breaker"`
	ProviderCooldown     GateConfig         `json:"providerCooldown"`
	Cooldown             CooldownConfig     `json:"cooldown"`
	Lockout              LockoutConfig      `json:"lockout"`
	SessionAffinityTTLMs int                `json:"sessionAffinityTtlMs"`
	RequestQueue         QueueConfig        `json:"requestQueue"`
	ThroughputWatchdog   WatchdogConfig     `json:"throughputWatchdog"`
	ComboCooldownWait    CooldownWaitConfig `json:"comboCooldownWait"`
	// StreamRecovery is the stream recovery of every combo and
	// provider/model route that sets none of its own; off when absent.
	StreamRecovery *StreamRecoveryConfig `json:"streamRecovery,omitempty"`
	// ProviderErrorRules are operator rules by provider id.
	ProviderErrorRules map[string][]ErrorRule `json:"providerErrorRules"`
	// LeaseTTLMs is the session lease lifetime.
	LeaseTTLMs int `json:"leaseTtlMs"`
}

// BreakerProfile is a breaker profile; zero fields keep the class default.
type BreakerProfile struct {
	DegradedAt      int `json:"degradedAt"`
	OpenAt          int `json:"openAt"`
	ResetMs         int `json:"resetMs"`
	MaxMultiplier   int `json:"maxMultiplier"`
	EscalationCount int `json:"escalationCount"`
	WindowMs        int `json:"windowMs"`
	// ConnDedupMs: further failures of one connection this soon after its
	// last counted one are not counted (default 5000).
	ConnDedupMs int `json:"connDedupMs"`
	// NetworkDedupMs: network errors of the provider this soon after the
	// last counted one are not counted (default 10000).
	NetworkDedupMs int `json:"networkDedupMs"`
}

// BreakerConfig holds the breaker profile of each credential class.
type BreakerConfig struct {
	OAuth  BreakerProfile `json:"oauth"`
	APIKey BreakerProfile `json:"apikey"`
	Local  BreakerProfile `json:"local"`
}

// GateConfig is the opt-in provider cooldown window gate.
type GateConfig struct {
	Enabled            bool `json:"enabled"`
	MinRetryCooldownMs int  `json:"minRetryCooldownMs"`
	MaxRetryCooldownMs int  `json:"maxRetryCooldownMs"`
}

// CooldownProfile shapes the connection cooldowns of one class.
type CooldownProfile struct {
	BaseMs int `json:"baseMs"`
	Steps  int `json:"steps"`
	MaxMs  int `json:"maxMs"`
}

// CooldownConfig configures connection cooldowns.
type CooldownConfig struct {
	OAuth     CooldownProfile `json:"oauth"`
	APIKey    CooldownProfile `json:"apikey"`
	MaxHintMs int             `json:"maxHintMs"`
}

// LockoutConfig configures model lockouts (off unless enabled).
type LockoutConfig struct {
	Enabled            bool  `json:"enabled"`
	ErrorCodes         []int `json:"errorCodes"`
	BaseCooldownMs     int   `json:"baseCooldownMs"`
	MaxCooldownMs      int   `json:"maxCooldownMs"`
	MaxBackoffSteps    int   `json:"maxBackoffSteps"`
	EscalationWindowMs int   `json:"escalationWindowMs"`
}

// QueueConfig configures per-connection admission.
type QueueConfig struct {
	MaxQueueWaitMs     int `json:"maxQueueWaitMs"`
	ExecutionTimeoutMs int `json:"executionTimeoutMs"`
	MaxQueueDepth      int `json:"maxQueueDepth"`
	RequestsPerMinute  int `json:"requestsPerMinute"`
}

// WatchdogConfig guards streamed answers.
type WatchdogConfig struct {
	Enabled           bool  `json:"enabled"`
	WarmupMs          int   `json:"warmupMs"`
	WindowMs          int   `json:"windowMs"`
	MinBytesPerSecond int64 `json:"minBytesPerSecond"`
	IdleTimeoutMs     int   `json:"idleTimeoutMs"`
	// AttemptDeadlineMs bounds each streamed attempt from its start,
	// whatever it sends: at the deadline the attempt is cut
	// (STREAM_ATTEMPT_DEADLINE), before its commit the request moves on to
	// the next target, after it the client's stream ends broken. Absent
	// (or null) means DefaultAttemptDeadline, 300 000; an explicit 0 (or a
	// negative value) turns it off.
	AttemptDeadlineMs *int `json:"attemptDeadlineMs"`
	// HoldHeartbeats is accepted for compatibility; the router always
	// holds back heartbeats until a stream's first useful output.
	HoldHeartbeats bool `json:"holdHeartbeats"`
}

// DefaultAttemptDeadline bounds a streamed attempt when
// WatchdogConfig.AttemptDeadlineMs is absent: 5 min, half the request's
// 10 min deadline, so that a stream cut at it leaves time for a fallback.
const DefaultAttemptDeadline = 5 * time.Minute

// attemptDeadline is the effective attempt deadline; 0 means off.
func (w WatchdogConfig) attemptDeadline() time.Duration {
	if w.AttemptDeadlineMs == nil {
		return DefaultAttemptDeadline
	}
	return max(time.Duration(*w.AttemptDeadlineMs)*time.Millisecond, 0)
}

// CooldownWaitConfig is the combo cooldown-aware retry. For MaxWaitMs and
// MaxAttempts 0 is a value: absent (or null) means the default (90 000 ms,
// 5), and an explicit 0 turns waiting off. MaxWaitMs is clamped to
// 0..300 000 and MaxAttempts to 0..10; BudgetMs 0 means 300 000.
type CooldownWaitConfig struct {
	Disabled    bool `json:"disabled"`
	MaxWaitMs   *int `json:"maxWaitMs"`
	MaxAttempts *int `json:"maxAttempts"`
	BudgetMs    int  `json:"budgetMs"`
}

// ErrorRule is an operator rule: a status and a body phrase that decide the
// scope and reason of a failure.
type ErrorRule struct {
	Status     int    `json:"status"`
	Match      string `json:"match"`
	Scope      string `json:"scope"`
	Reason     string `json:"reason"`
	CooldownMs int    `json:"cooldownMs"`
}

// ConfigError is a refused configuration; Field names the offending field
// as a JSON path such as "combos[0].targets[1].provider".
type ConfigError struct {
	Field   string
	Problem string
}

func (e *ConfigError) Error() string { return "config: " + e.Field + ": " + e.Problem }

// Decode reads a configuration strictly: unknown fields, trailing data and
// wrong types are refused. It does not validate; see Config.Validate.
func Decode(data []byte) (*Config, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return nil, &ConfigError{Field: unknownFieldPath(data, strings.Trim(name, `"`)), Problem: "unknown field"}
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := wrongTypePath(data, te)
			if field == "" {
				field = "(document)"
			}
			return nil, &ConfigError{Field: field, Problem: "must be a JSON " + te.Value + " of another type (" + te.Type.String() + ")"}
		}
		return nil, fmt.Errorf("config: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &ConfigError{Field: "(document)", Problem: "data after the JSON object"}
	}
	return &c, nil
}

// unknownFieldPath returns where the unknown field name sits in the
// document, as a JSON path such as "providers[0].base_url", or name alone
// when it cannot be found.
func unknownFieldPath(data []byte, name string) string {
	var doc any
	if json.NewDecoder(bytes.NewReader(data)).Decode(&doc) != nil {
		return keyName(name)
	}
	if path, ok := findUnknown(doc, reflect.TypeFor[Config](), "", name); ok {
		return path
	}
	return keyName(name)
}

// keyName writes an object key as a path segment: the key itself, or ""
// for the empty key.
func keyName(k string) string {
	if k == "" {
		return `""`
	}
	return k
}

// findUnknown walks the decoded value v along the Go type t and returns the
// path of the first object key called name that t does not declare. Keys
// are visited in sorted order, so the answer does not depend on map order.
func findUnknown(v any, t reflect.Type, path, name string) (string, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return "", false
		}
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			kp := keyName(k)
			if path != "" {
				kp = path + "." + kp
			}
			f, known := jsonField(t, k)
			if !known {
				if k == name {
					return kp, true
				}
				continue
			}
			if p, ok := findUnknown(obj[k], f.Type, kp, name); ok {
				return p, true
			}
		}
	case reflect.Slice:
		list, _ := v.([]any)
		for i, e := range list {
			if p, ok := findUnknown(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), name); ok {
				return p, true
			}
		}
	case reflect.Map:
		obj, _ := v.(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			if p, ok := findUnknown(obj[k], t.Elem(), path+"."+k, name); ok {
				return p, true
			}
		}
	}
	return "", false
}

// wrongTypePath returns where the value refused by te sits in the
// document, with its list indices and map keys, such as
// "providers[0].connections[1].maxConcurrent"; te.Field (which has
// neither) when it cannot be found.
func wrongTypePath(data []byte, te *json.UnmarshalTypeError) string {
	var doc any
	if te.Type == nil || json.NewDecoder(bytes.NewReader(data)).Decode(&doc) != nil {
		return te.Field
	}
	if path, ok := findWrongType(doc, reflect.TypeFor[Config](), "", "", te); ok {
		return path
	}
	return te.Field
}

// findWrongType walks the decoded value v along the Go type t; path is the
// full path so far and fields the struct field names only, the form
// encoding/json reports. It returns the first path, in sorted key order,
// whose value has the JSON kind and Go type te describes.
func findWrongType(v any, t reflect.Type, path, fields string, te *json.UnmarshalTypeError) (string, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if fields == te.Field && t == te.Type && strings.HasPrefix(te.Value, jsonKind(v)) {
		return path, true
	}
	join := func(a, b string) string {
		if a == "" {
			return b
		}
		return a + "." + b
	}
	switch obj, _ := v.(map[string]any); t.Kind() {
	case reflect.Struct:
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			if f, ok := jsonField(t, k); ok {
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				if p, ok := findWrongType(obj[k], f.Type, join(path, k), join(fields, name), te); ok {
					return p, true
				}
			}
		}
	case reflect.Map:
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			if p, ok := findWrongType(obj[k], t.Elem(), join(path, k), fields, te); ok {
				return p, true
			}
		}
	case reflect.Slice:
		list, _ := v.([]any)
		for i, e := range list {
			if p, ok := findWrongType(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), fields, te); ok {
				return p, true
			}
		}
	}
	return "", false
}

// jsonKind names the JSON kind of a decoded value as encoding/json does in
// its errors.
func jsonKind(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "null"
}

// jsonField finds the field of struct type t that the JSON key decodes
// into: the field whose tag name equals key, ignoring case as
// encoding/json does.
func jsonField(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "" {
			tag = f.Name
		}
		if f.IsExported() && tag != "-" && strings.EqualFold(tag, key) {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// ConfigErrors are every problem Validate found, in document order. Its
// Unwrap gives each *ConfigError, so errors.As finds the first.
type ConfigErrors []*ConfigError

func (e ConfigErrors) Error() string {
	lines := make([]string, len(e))
	for i, ce := range e {
		lines[i] = ce.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the problems as errors.
func (e ConfigErrors) Unwrap() []error {
	out := make([]error, len(e))
	for i, ce := range e {
		out[i] = ce
	}
	return out
}

// Problems lists the refusals in err: the *ConfigError values of a
// ConfigErrors, a single *ConfigError, or none.
func Problems(err error) []*ConfigError {
	var many ConfigErrors
	if errors.As(err, &many) {
		return many
	}
	var one *ConfigError
	if errors.As(err, &one) {
		return []*ConfigError{one}
	}
	return nil
}

// Parse decodes a JSON configuration, resolves its ${NAME} references from
// the process environment and validates it.
func Parse(data []byte) (*Config, error) { return ParseWith(data, FormatJSON, os.LookupEnv) }

// ParseYAML is Parse for a YAML document.
func ParseYAML(data []byte) (*Config, error) { return ParseWith(data, FormatYAML, os.LookupEnv) }

// Format is the syntax of a configuration document.
type Format int

// Formats of a configuration document.
const (
	FormatJSON Format = iota
	FormatYAML
)

// FormatOf returns the format a file's name says: .json, or .yaml and .yml
// (in any case).
func FormatOf(path string) (Format, error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json":
		return FormatJSON, nil
	case ".yaml", ".yml":
		return FormatYAML, nil
	}
	return 0, fmt.Errorf("config: %s: the file name must end in .json, .yaml or .yml", path)
}

// ParseWith decodes data in format f, resolves its ${NAME} references with
// lookup and validates it.
func ParseWith(data []byte, f Format, lookup func(string) (string, bool)) (*Config, error) {
	var c *Config
	var err error
	if f == FormatYAML {
		c, err = DecodeYAML(data)
	} else {
		c, err = Decode(data)
	}
	if err != nil {
		return nil, err
	}
	if err := c.ExpandEnv(lookup); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Load reads and parses the configuration file at path, JSON or YAML by
// its extension (see FormatOf).
func Load(path string) (*Config, error) {
	f, err := FormatOf(path)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseWith(data, f, os.LookupEnv)
}

var classes = map[string]bool{"": true, "apikey": true, "oauth": true, "local": true}

// Validate checks references and uniqueness: provider, connection, API key
// and combo ids are unique; targets name known providers, connections and
// models; strategies are known and a fusion or pipeline is complete; base
// URLs are http(s). Every problem is reported, as a ConfigErrors in
// document order; a resolved environment value never appears in one.
func (c *Config) Validate() error {
	var errs ConfigErrors
	bad := func(field, format string, a ...any) {
		errs = append(errs, &ConfigError{Field: field, Problem: c.redact(fmt.Sprintf(format, a...))})
	}
	keep := func(err error) {
		for _, ce := range Problems(err) {
			errs = append(errs, &ConfigError{Field: ce.Field, Problem: c.redact(ce.Problem)})
		}
	}
	keep(c.Server.validate())
	keep(c.State.validate())
	keep(c.Redis.validate())
	keep(c.Metrics.validate())
	keep(c.Resilience.StreamRecovery.validate("resilience.streamRecovery"))
	if len(c.Providers) == 0 {
		bad("providers", "at least one provider is required")
	}
	providers := map[string]*Provider{}
	conns := map[string]string{} // connection id → provider
	for i := range c.Providers {
		p := &c.Providers[i]
		f := fmt.Sprintf("providers[%d]", i)
		switch {
		case p.ID == "" || strings.Contains(p.ID, "/"):
			bad(f+".id", "must be non-empty and contain no '/'")
		case providers[p.ID] != nil:
			bad(f+".id", "duplicate provider id %q", p.ID)
		default:
			providers[p.ID] = p
		}
		if !classes[strings.ToLower(p.Class)] {
			bad(f+".class", "unknown class %q (valid: apikey, oauth, local)", p.Class)
		}
		if len(p.Connections) == 0 {
			bad(f+".connections", "at least one connection is required")
		}
		u, err := url.Parse(p.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad(f+".baseURL", "must be an absolute http or https URL, got %q", p.BaseURL)
		}
		keep(checkProviderHeaders(f, p.Headers))
		for j, cn := range p.Connections {
			cf := fmt.Sprintf("%s.connections[%d]", f, j)
			switch {
			case cn.ID == "":
				bad(cf+".id", "must be non-empty")
			case conns[cn.ID] != "":
				bad(cf+".id", "duplicate connection id %q (also in provider %q)", cn.ID, conns[cn.ID])
			default:
				conns[cn.ID] = p.ID
			}
			if cn.MaxConcurrent < 0 {
				bad(cf+".maxConcurrent", "must be ≥ 0")
			}
		}
	}
	keys, secrets := map[string]bool{}, map[string]bool{}
	for i, k := range c.APIKeys {
		f := fmt.Sprintf("apiKeys[%d]", i)
		switch {
		case k.ID == "":
			bad(f+".id", "must be non-empty")
		case keys[k.ID]:
			bad(f+".id", "duplicate API key id %q", k.ID)
		}
		switch {
		case k.Key == "":
			bad(f+".key", "must be non-empty")
		case secrets[k.Key]:
			bad(f+".key", "duplicate key value (key %q)", k.ID)
		}
		if k.MaxInFlight < 0 {
			bad(f+".maxInFlight", "must be ≥ 0 (0 or absent means no cap)")
		}
		for j, s := range k.Scopes {
			if s != admin.ScopeLeaseExclusive {
				bad(fmt.Sprintf("%s.scopes[%d]", f, j), "unknown scope %q (valid: %s)", s, admin.ScopeLeaseExclusive)
			}
		}
		if err := admin.ValidateLeaseKeyPolicy(k.Scopes, k.AllowedConnections); err != nil {
			bad(f+".allowedConnections", "a key with scope %s needs at least one allowed connection", admin.ScopeLeaseExclusive)
		}
		for j, cn := range k.AllowedConnections {
			if conns[cn] == "" {
				bad(fmt.Sprintf("%s.allowedConnections[%d]", f, j), "unknown connection %q", cn)
			}
		}
		keys[k.ID], secrets[k.Key] = true, true
	}
	combos := map[string]*Combo{}
	for i := range c.Combos {
		cb := &c.Combos[i]
		f := fmt.Sprintf("combos[%d]", i)
		switch {
		case cb.Name == "" || strings.Contains(cb.Name, "/"):
			bad(f+".name", "must be non-empty and contain no '/'")
		case combos[cb.Name] != nil:
			bad(f+".name", "duplicate combo name %q", cb.Name)
		default:
			combos[cb.Name] = cb
		}
		checkTarget := func(tf string, t Target) {
			p := providers[t.Provider]
			switch {
			case p == nil:
				bad(tf+".provider", "unknown provider %q", t.Provider)
			case t.Model == "":
				bad(tf+".model", "must be non-empty")
			case len(p.Models) > 0 && !contains(p.Models, t.Model):
				bad(tf+".model", "provider %q does not list model %q", t.Provider, t.Model)
			case t.Connection != "" && conns[t.Connection] != t.Provider:
				bad(tf+".connection", "provider %q has no connection %q", t.Provider, t.Connection)
			}
		}
		for j, t := range cb.Targets {
			checkTarget(fmt.Sprintf("%s.targets[%d]", f, j), t)
		}
		keep(cb.Settings.StreamRecovery.validate(f + ".settings.streamRecovery"))
		if cb.Strategy != StrategyFusion && cb.Fusion != nil {
			bad(f+".fusion", "only a combo with strategy %q takes fusion settings", StrategyFusion)
		}
		if cb.Strategy != StrategyPipeline && len(cb.Steps) > 0 {
			bad(f+".steps", "only a combo with strategy %q has steps", StrategyPipeline)
		}
		switch cb.Strategy {
		case StrategyFusion:
			if len(cb.Targets) < 2 {
				bad(f+".targets", "a fusion panel needs at least two targets")
			}
			if fu := cb.Fusion; fu != nil {
				if fu.Judge != nil {
					checkTarget(f+".fusion.judge", *fu.Judge)
				}
				for _, n := range []struct {
					name string
					v    int
					def  string
				}{{"minPanel", fu.MinPanel, "2"}, {"graceMs", fu.GraceMs, "8000"}, {"hardCapMs", fu.HardCapMs, "90000"}} {
					if n.v < 0 {
						bad(f+".fusion."+n.name, "must be ≥ 0 (0 or absent means %s)", n.def)
					}
				}
			}
		case StrategyPipeline:
			if len(cb.Targets) > 0 {
				bad(f+".targets", "a pipeline has steps, not targets")
			}
			if len(cb.Steps) == 0 {
				bad(f+".steps", "a pipeline needs at least one step")
			}
		default:
			if len(cb.Targets) == 0 {
				bad(f+".targets", "at least one target is required")
			}
			if err := checkStrategy(cb.Strategy); err != nil {
				bad(f+".strategy", "%v", err)
			}
		}
	}
	// Pipeline steps may name combos declared after them.
	for i, cb := range c.Combos {
		if cb.Strategy != StrategyPipeline {
			continue
		}
		for j, step := range cb.Steps {
			sf := fmt.Sprintf("combos[%d].steps[%d]", i, j)
			if sc := combos[step]; sc != nil {
				if sc.Strategy == StrategyFusion || sc.Strategy == StrategyPipeline {
					bad(sf, "step %q is a %s; a step must be a combo with an ordering strategy or a provider/model", step, sc.Strategy)
				}
				continue
			}
			pid, m, ok := strings.Cut(step, "/")
			p := providers[pid]
			switch {
			case !ok || p == nil || m == "":
				bad(sf, "unknown combo or provider/model %q", step)
			case len(p.Models) > 0 && !contains(p.Models, m):
				bad(sf, "provider %q does not list model %q", pid, m)
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errs
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// checkStrategy asks a throwaway router whether it knows the strategy
// name, so that every strategy the library registers is accepted.
func checkStrategy(name string) error {
	_, err := combo.New(combo.Config{}).Strategy(name)
	var ue *combo.Error
	if errors.As(err, &ue) && ue.Code == combo.CodeUnknownStrategy {
		valid := append(slices.Clone(ue.Valid), StrategyFusion, StrategyPipeline)
		slices.Sort(valid)
		return fmt.Errorf("unknown strategy %q (valid: %s)", ue.Strategy, strings.Join(valid, ", "))
	}
	return nil
}

// Strategies lists every strategy name a combo may use: the router's
// ordering strategies, fusion and pipeline, sorted.
func Strategies() []string {
	_, err := combo.New(combo.Config{}).Strategy("\x00")
	var ue *combo.Error
	var valid []string
	if errors.As(err, &ue) {
		valid = slices.Clone(ue.Valid)
	}
	valid = append(valid, StrategyFusion, StrategyPipeline)
	slices.Sort(valid)
	return valid
}
