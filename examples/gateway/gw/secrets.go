package gw

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// DecodeYAML reads a YAML configuration strictly, with the schema and the
// refusals of Decode: the document is turned into JSON and decoded by
// Decode, so an unknown or mistyped field is named by the same path.
// One document only; anchors and aliases are expanded.
func DecodeYAML(data []byte) (*Config, error) {
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &ConfigError{Field: "(document)", Problem: "not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	if doc == nil {
		doc = map[string]any{}
	}
	js, err := json.Marshal(doc)
	if err != nil {
		return nil, &ConfigError{Field: "(document)", Problem: "not a configuration: " + err.Error()}
	}
	return Decode(js)
}

// ExpandEnv replaces every ${NAME} reference in the configuration's
// strings (map keys excepted) with the value lookup gives for NAME; $${
// stands for a literal "${". A missing variable or a malformed reference
// is refused as a ConfigErrors naming each field and variable. The values
// it resolves are remembered, so that they are redacted from the
// gateway's logs and from every refusal.
func (c *Config) ExpandEnv(lookup func(string) (string, bool)) error {
	var errs ConfigErrors
	expandValue(reflect.ValueOf(c).Elem(), "", func(path, s string) string {
		out, err := expandString(s, lookup, &c.secrets)
		if err != nil {
			errs = append(errs, &ConfigError{Field: path, Problem: err.Error()})
		}
		return out
	})
	if len(errs) > 0 {
		return errs
	}
	return nil
}

// expandValue calls fn for every settable string reachable from v, with
// its JSON path, and stores what fn returns.
func expandValue(v reflect.Value, path string, fn func(path, s string) string) {
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			expandValue(v.Elem(), path, fn)
		}
	case reflect.String:
		if strings.Contains(v.String(), "$") {
			v.SetString(fn(path, v.String()))
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" {
				name = f.Name
			}
			expandValue(v.Field(i), join(name), fn)
		}
	case reflect.Slice:
		for i := range v.Len() {
			expandValue(v.Index(i), fmt.Sprintf("%s[%d]", path, i), fn)
		}
	case reflect.Map:
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		for _, k := range keys {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			expandValue(e, join(keyName(k.String())), fn)
			v.SetMapIndex(k, e)
		}
	}
}

// expandString resolves the references of s; resolved values are
// appended to secrets.
func expandString(s string, lookup func(string) (string, bool), secrets *[]string) (string, error) {
	var b strings.Builder
	var missing []string
	for {
		i := strings.IndexByte(s, '$')
		if i < 0 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		s = s[i:]
		switch {
		case strings.HasPrefix(s, "$${"):
			b.WriteString("${")
			s = s[3:]
		case strings.HasPrefix(s, "${"):
			end := strings.IndexByte(s, '}')
			if end < 0 || !validEnvName(s[2:end]) {
				return "", errors.New(`malformed environment reference: write ${NAME} with NAME of letters, digits and '_', or $${ for a literal "${"`)
			}
			name := s[2:end]
			val, ok := lookup(name)
			if !ok {
				missing = append(missing, name)
			} else if val != "" {
				*secrets = append(*secrets, val)
			}
			b.WriteString(val)
			s = s[end+1:]
		default:
			b.WriteByte('$')
			s = s[1:]
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("environment variable %s is not set", strings.Join(missing, ", "))
	}
	return b.String(), nil
}

func validEnvName(n string) bool {
	if n == "" || (n[0] >= '0' && n[0] <= '9') {
		return false
	}
	for _, r := range n {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// redact replaces every resolved environment value in s.
func (c *Config) redact(s string) string { return redactAll(s, c.secrets) }

func redactAll(s string, secrets []string) string {
	for _, v := range secrets {
		if v != "" && strings.Contains(s, v) {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
	}
	return s
}

// redactHandler is a slog.Handler that removes the configuration's
// resolved environment values from every record before passing it on.
// The set of values is read at each record, so a reload's new secrets are
// redacted too.
type redactHandler struct {
	next    slog.Handler
	secrets func() []string
}

func (h *redactHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h *redactHandler) Handle(ctx context.Context, r slog.Record) error {
	sec := h.secrets()
	out := slog.NewRecord(r.Time, r.Level, redactAll(r.Message, sec), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(a, sec))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *redactHandler) WithAttrs(as []slog.Attr) slog.Handler {
	sec := h.secrets()
	cp := make([]slog.Attr, len(as))
	for i, a := range as {
		cp[i] = redactAttr(a, sec)
	}
	return &redactHandler{next: h.next.WithAttrs(cp), secrets: h.secrets}
}

func (h *redactHandler) WithGroup(name string) slog.Handler {
	return &redactHandler{next: h.next.WithGroup(name), secrets: h.secrets}
}

// redactAttr turns a's value into its text with the secrets removed;
// numbers, booleans, times and durations carry no secret and are kept.
func redactAttr(a slog.Attr, sec []string) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindGroup:
		g := v.Group()
		cp := make([]any, len(g))
		for i, x := range g {
			cp[i] = redactAttr(x, sec)
		}
		return slog.Group(a.Key, cp...)
	case slog.KindString, slog.KindAny:
		return slog.String(a.Key, redactAll(v.String(), sec))
	}
	return slog.Attr{Key: a.Key, Value: v}
}
