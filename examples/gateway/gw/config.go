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
	"reflect"
	"slices"
	"strings"

	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/lease"
)

// DefaultListen is the address used when neither the config nor a flag
// gives one.
const DefaultListen = "127.0.0.1:8080"

// Config is the gateway's JSON configuration. Durations are integer
// milliseconds (fields ending in Ms); a zero or absent field means the
// library's default.
type Config struct {
	Listen     string     `json:"listen"`
	AdminToken string     `json:"adminToken"`
	APIKeys    []APIKey   `json:"apiKeys"`
	Providers  []Provider `json:"providers"`
	Combos     []Combo    `json:"combos"`
	Resilience Resilience `json:"resilience"`
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
}

// Connection is one credential of a provider. Its id is unique across all
// providers.
type Connection struct {
	ID            string `json:"id"`
	Name          string `json:"name"`
	APIKey        string `json:"apiKey"`
	MaxConcurrent int    `json:"maxConcurrent"`
}

// Combo is a named, ordered list of targets served by one strategy.
type Combo struct {
	Name     string        `json:"name"`
	Strategy string        `json:"strategy"`
	Targets  []Target      `json:"targets"`
	Settings ComboSettings `json:"settings"`
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
	AttemptDeadlineMs int   `json:"attemptDeadlineMs"`
	// HoldHeartbeats is accepted for compatibility; the router always
	// holds back heartbeats until a stream's first useful output.
	HoldHeartbeats bool `json:"holdHeartbeats"`
}

// CooldownWaitConfig is the combo cooldown-aware retry.
type CooldownWaitConfig struct {
	Disabled    bool `json:"disabled"`
	MaxWaitMs   int  `json:"maxWaitMs"`
	MaxAttempts int  `json:"maxAttempts"`
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

// Parse decodes and validates a configuration.
func Parse(data []byte) (*Config, error) {
	c, err := Decode(data)
	if err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Load reads and parses the configuration file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data)
}

var classes = map[string]bool{"": true, "apikey": true, "oauth": true, "local": true}

// Validate checks references and uniqueness: provider, connection, API key
// and combo ids are unique; targets name known providers, connections and
// models; strategies are known; base URLs are http(s). The first problem
// is returned as a *ConfigError.
func (c *Config) Validate() error {
	bad := func(field, format string, a ...any) error {
		return &ConfigError{Field: field, Problem: fmt.Sprintf(format, a...)}
	}
	if len(c.Providers) == 0 {
		return bad("providers", "at least one provider is required")
	}
	providers := map[string]*Provider{}
	conns := map[string]string{} // connection id → provider
	for i := range c.Providers {
		p := &c.Providers[i]
		f := fmt.Sprintf("providers[%d]", i)
		switch {
		case p.ID == "" || strings.Contains(p.ID, "/"):
			return bad(f+".id", "must be non-empty and contain no '/'")
		case providers[p.ID] != nil:
			return bad(f+".id", "duplicate provider id %q", p.ID)
		case !classes[strings.ToLower(p.Class)]:
			return bad(f+".class", "unknown class %q (valid: apikey, oauth, local)", p.Class)
		case len(p.Connections) == 0:
			return bad(f+".connections", "at least one connection is required")
		}
		u, err := url.Parse(p.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad(f+".baseURL", "must be an absolute http or https URL, got %q", p.BaseURL)
		}
		providers[p.ID] = p
		for j, cn := range p.Connections {
			cf := fmt.Sprintf("%s.connections[%d]", f, j)
			switch {
			case cn.ID == "":
				return bad(cf+".id", "must be non-empty")
			case conns[cn.ID] != "":
				return bad(cf+".id", "duplicate connection id %q (also in provider %q)", cn.ID, conns[cn.ID])
			case cn.MaxConcurrent < 0:
				return bad(cf+".maxConcurrent", "must be ≥ 0")
			}
			conns[cn.ID] = p.ID
		}
	}
	keys, secrets := map[string]bool{}, map[string]bool{}
	for i, k := range c.APIKeys {
		f := fmt.Sprintf("apiKeys[%d]", i)
		switch {
		case k.ID == "":
			return bad(f+".id", "must be non-empty")
		case keys[k.ID]:
			return bad(f+".id", "duplicate API key id %q", k.ID)
		case k.Key == "":
			return bad(f+".key", "must be non-empty")
		case secrets[k.Key]:
			return bad(f+".key", "duplicate key value (key %q)", k.ID)
		}
		for j, s := range k.Scopes {
			if s != lease.ScopeExclusive {
				return bad(fmt.Sprintf("%s.scopes[%d]", f, j), "unknown scope %q (valid: %s)", s, lease.ScopeExclusive)
			}
		}
		if err := lease.ValidateKeyPolicy(k.Scopes, k.AllowedConnections); err != nil {
			return bad(f+".allowedConnections", "a key with scope %s needs at least one allowed connection", lease.ScopeExclusive)
		}
		for j, cn := range k.AllowedConnections {
			if conns[cn] == "" {
				return bad(fmt.Sprintf("%s.allowedConnections[%d]", f, j), "unknown connection %q", cn)
			}
		}
		keys[k.ID], secrets[k.Key] = true, true
	}
	combos := map[string]bool{}
	for i, cb := range c.Combos {
		f := fmt.Sprintf("combos[%d]", i)
		switch {
		case cb.Name == "" || strings.Contains(cb.Name, "/"):
			return bad(f+".name", "must be non-empty and contain no '/'")
		case combos[cb.Name]:
			return bad(f+".name", "duplicate combo name %q", cb.Name)
		case len(cb.Targets) == 0:
			return bad(f+".targets", "at least one target is required")
		}
		if err := checkStrategy(cb.Strategy); err != nil {
			return bad(f+".strategy", "%v", err)
		}
		for j, t := range cb.Targets {
			tf := fmt.Sprintf("%s.targets[%d]", f, j)
			p := providers[t.Provider]
			switch {
			case p == nil:
				return bad(tf+".provider", "unknown provider %q", t.Provider)
			case t.Model == "":
				return bad(tf+".model", "must be non-empty")
			case len(p.Models) > 0 && !contains(p.Models, t.Model):
				return bad(tf+".model", "provider %q does not list model %q", t.Provider, t.Model)
			case t.Connection != "" && conns[t.Connection] != t.Provider:
				return bad(tf+".connection", "provider %q has no connection %q", t.Provider, t.Connection)
			}
		}
		combos[cb.Name] = true
	}
	return nil
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
	var ue *combo.UnknownStrategyError
	if errors.As(err, &ue) {
		return fmt.Errorf("unknown strategy %q (valid: %s)", ue.Name, strings.Join(ue.Valid, ", "))
	}
	return nil
}
