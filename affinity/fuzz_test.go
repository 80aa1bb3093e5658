package affinity

import (
	"encoding/hex"
	"errors"
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// maxKeyName is the longest normalised key: the longest source label, ":",
// and either 180 kept characters or "sha256:" and 64 hex digits.
const maxKeyName = len("prompt-cache") + 1 + maxKeptValue

func checkKey(t *testing.T, k Key, ok bool) {
	t.Helper()
	if !ok {
		if !k.IsZero() {
			t.Fatalf("no key but non-zero Key %q", k.name)
		}
		return
	}
	if k.IsZero() || len(k.name) > maxKeyName {
		t.Fatalf("bad key length %d: %q", len(k.name), k.name)
	}
	src, rest, found := strings.Cut(k.name, ":")
	switch src {
	case "header", "metadata", "claude-code", "conversation", "session", "prompt-cache", "input":
	default:
		t.Fatalf("unknown source in %q", k.name)
	}
	if !found || rest == "" || !isSafe(rest) {
		t.Fatalf("unsafe key %q", k.name)
	}
	if h, ok := strings.CutPrefix(rest, "sha256:"); ok && len(rest) > maxKeptValue {
		if _, err := hex.DecodeString(h); err != nil || len(h) != 64 {
			t.Fatalf("bad digest in %q", k.name)
		}
	}
	if src == "input" && !strings.HasPrefix(rest, "sha256:") {
		t.Fatalf("input key not hashed: %q", k.name)
	}
	if s := k.String(); len(s) > len("prompt-cache~")+8 {
		t.Fatalf("redacted form too long: %q", s)
	}
}

// revealed reports whether a stored or printed form reveals raw.
func revealed(raw, form string) bool {
	raw = strings.TrimSpace(raw)
	// Short or hex-only values can occur in a digest by chance.
	if len(raw) < 6 || strings.Trim(raw, "0123456789abcdef") == "" {
		return false
	}
	return strings.Contains(form, raw)
}

func FuzzKeyFrom(f *testing.F) {
	f.Add("abc", []byte(`{"metadata":{"session_id":"s1"}}`))
	f.Add("   ", []byte(`{"metadata":{"user_id":"{\"session_id\":\"cc\"}"}}`))
	f.Add("", []byte(`{"messages":[{"role":"system","content":"S"},{"role":"user","content":"hello"}]}`))
	f.Add("", []byte(`{"input":[{"role":"user","content":[{"type":"input_text","text":"a"}]}]}`))
	f.Add("", []byte(`{"contents":[{"role":"user","parts":[{"text":"g"}]}],"prompt":{"parts":["x"]}}`))
	f.Add("", []byte(`{"conversation_id":"c","session_id":"s","prompt_cache_key":"p","query":"q"}`))
	f.Add(strings.Repeat("a", 181), []byte(`{"session_id":"a b c"}`))
	f.Add("", []byte(`{"prompt":[[["deep"]]],"instruction":{"content":{"text":"i"}}}`))
	f.Add("\xff\xfe", []byte("{\"session_id\":\"\xff\"}"))
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		h := http.Header{}
		if header != "" {
			h.Set(headerSession, header)
		}
		k, ok := KeyFrom(h, body)
		checkKey(t, k, ok)
		if !ok {
			return
		}
		sk := StoreKey{Provider: "p", Session: k.Digest()}.String()
		for _, form := range []string{sk, k.String()} {
			if revealed(header, form) {
				t.Fatalf("raw header %q revealed in %q", header, form)
			}
		}
		if k2, ok2 := KeyFrom(h, body); !ok2 || k2 != k {
			t.Fatal("extraction not deterministic")
		}
		var e Extractor
		kb, okb := e.KeyFromBody(body)
		checkKey(t, kb, okb)
	})
}

func FuzzNewKey(f *testing.F) {
	f.Add("abc")
	f.Add("  spaced value  ")
	f.Add(strings.Repeat("a", 180))
	f.Add(strings.Repeat("a", 181))
	f.Add(strings.Repeat("é", 4097))
	f.Add("\x00\xff")
	f.Fuzz(func(t *testing.T, v string) {
		k, ok := NewKey("session", v)
		checkKey(t, k, ok)
		n := utf8.RuneCountInString(v)
		trimmed := strings.TrimSpace(v)
		switch {
		case n > maxKeyInput || trimmed == "":
			if ok {
				t.Fatalf("accepted %d chars / blank", n)
			}
		case !ok:
			t.Fatal("refused a usable value")
		case len(trimmed) <= maxKeptValue && isSafe(trimmed):
			if k.name != "session:"+trimmed {
				t.Fatalf("safe value not kept: %q", k.name)
			}
		default:
			if k.name != "session:sha256:"+sha(trimmed) {
				t.Fatalf("value not hashed: %q", k.name)
			}
			if revealed(v, k.name) {
				t.Fatalf("raw value in key %q", k.name)
			}
		}
	})
}

func FuzzFromEnv(f *testing.F) {
	f.Add("3600000", "", "claude=0,codex=60000")
	f.Add("", "120000", "")
	f.Add("-1", "86400001", "a=1.5,=3,b")
	f.Add("1e3", "+5", " x = 9 ,,")
	f.Add("  ", "7", "a=1e3,b= 5 ,c=NaN,d=86400001")
	f.Fuzz(func(t *testing.T, ttl, legacy, providers string) {
		m := map[string]string{}
		if ttl != "" {
			m[envTTL] = ttl
		}
		if legacy != "" {
			m[envLegacyTTL] = legacy
		}
		if providers != "" {
			m[envProviderTTL] = providers
		}
		c, err := FromEnv(env(m))
		checkConfig(t, c)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "affinity: invalid_config: ") || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("bad error: %v", err)
			}
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeInvalidConfig || e.Status != 400 || e.Field == "" {
				t.Fatalf("bad error: %#v", e)
			}
		}
	})
}

func checkConfig(t *testing.T, s Config) {
	t.Helper()
	if s.TTL < 0 || s.TTL > maxTTL {
		t.Fatalf("TTL out of range: %v", s.TTL)
	}
	for p, d := range s.ProviderTTL {
		if d < 0 || d > maxTTL {
			t.Fatalf("provider %q TTL out of range: %v", p, d)
		}
	}
}

func FuzzNormalize(f *testing.F) {
	f.Add(int64(0), "claude", int64(3_600_000_000_000), int64(0))
	f.Add(int64(-1), "", int64(-5), int64(1<<62))
	f.Add(int64(1<<62), "x", int64(1), int64(-1<<62))
	f.Fuzz(func(t *testing.T, ttl int64, provider string, pttl, req int64) {
		in := Config{TTL: time.Duration(ttl), ProviderTTL: map[string]time.Duration{provider: time.Duration(pttl)}, MaxPins: int(pttl), MaxConnections: int(req)}
		s := in.Normalize()
		checkConfig(t, s)
		if n := s.Normalize(); n.TTL != s.TTL || !maps.Equal(n.ProviderTTL, s.ProviderTTL) || n.MaxPins != s.MaxPins || n.MaxConnections != s.MaxConnections {
			t.Fatal("Normalize not idempotent")
		}
		if s.MaxPins < 1 || s.MaxPins > maxBound || s.MaxConnections < 1 || s.MaxConnections > maxBound {
			t.Fatalf("bounds out of range: %d, %d", s.MaxPins, s.MaxConnections)
		}
		if in.TTL != time.Duration(ttl) || in.ProviderTTL[provider] != time.Duration(pttl) || len(in.ProviderTTL) != 1 {
			t.Fatal("Normalize modified its receiver")
		}
		got := in.TTLFor(provider, time.Duration(req))
		if got < 0 || got > maxTTL {
			t.Fatalf("TTLFor out of range: %v", got)
		}
		if got != s.TTLFor(provider, time.Duration(req)) {
			t.Fatal("TTLFor differs after Normalize")
		}
		if req > 0 && got != min(time.Duration(req), maxTTL) {
			t.Fatalf("request TTL %v not honoured: %v", req, got)
		}
	})
}

// FuzzPins drives Pins with a sequence of operations decoded from bytes and
// checks, after each step, that a selection is always one of the candidates
// and that a pinned connection was live.
func FuzzPins(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{0x10, 0x21, 0x32, 0x43, 0x54, 0x65, 0x76, 0x87, 0x98, 0xa9, 0xba})
	f.Add([]byte{0xff, 0x00, 0xfe, 0x01, 0x80, 0x7f})
	conns := []string{"A", "B", "C", "D"}
	keys := make([]Key, 4)
	for i := range keys {
		keys[i], _ = NewKey("session", string(rune('a'+i)))
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		p := New(Config{TTL: 10 * time.Second, MaxPins: 32, MaxConnections: 2})
		now := t0
		for _, op := range ops {
			k := keys[op>>6&3]
			c := cands(conns[op>>4&3:]...)
			// Time moves by -1..+6 s, so it sometimes goes backwards.
			now = now.Add(time.Duration(int(op>>2&7)-1) * time.Second)
			switch op & 3 {
			case 0:
				before, live := p.LookupAt("p", k, now)
				got, ok := p.SelectAt("p", k, c, now)
				if !ok || indexOf(c, got) < 0 {
					t.Fatalf("selected %q not a candidate", got)
				}
				if live && indexOf(c, before.Connection) >= 0 && got != before.Connection {
					t.Fatalf("live pin %q ignored for %q", before.Connection, got)
				}
				after, ok := p.LookupAt("p", k, now)
				if !ok || after.Connection != got || !after.Expires.After(now) {
					t.Fatalf("pin after select: %+v", after)
				}
			case 1:
				choice, ok := p.PlanAt(Request{Provider: "p", Key: k}, c, now)
				if !ok || indexOf(c, choice.Connection) < 0 {
					t.Fatalf("planned %q not a candidate", choice.Connection)
				}
				p.PinAt(Request{Provider: "p", Key: k}, choice.Connection, now)
			case 2:
				p.EvictAt("p", k, conns[op>>4&3], now)
			default:
				for _, pin := range p.SnapshotAt(now).Pins {
					if !pin.Expires.After(now) || pin.Remaining <= 0 {
						t.Fatalf("dead pin listed: %+v", pin)
					}
				}
			}
		}
	})
}

// FuzzMemoryStore runs random saves, loads, deletes and listings against a
// MemoryStore and a plain map, over keys chosen so that several share a
// part of the store, a digest prefix or a digest, and checks that both
// always agree on the live pins.
func FuzzMemoryStore(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{0x00, 0x08, 0x10, 0x41, 0x49, 0x52, 0x83, 0x8b, 0xc4, 0xcc})
	f.Add([]byte{0x20, 0x28, 0x30, 0x38, 0x22, 0x2a, 0x06, 0x0e, 0x27})
	base := skey(7, "openai")
	keys := []StoreKey{
		base,
		nearKey(base, "claude", 1),
		nearKey(base, "openai", 2),
		nearKey(base, "o", 3),
		nearKey(base, "openai", 9),
		skey(8, "claude"),
		skey(7, "claude"),
		nearKey(skey(8, "claude"), "openai", 4),
	}
	f.Fuzz(func(t *testing.T, ops []byte) {
		s := NewMemoryStore(0)
		model := map[StoreKey]Pin{}
		now := t0
		live := func(k StoreKey) (Pin, bool) {
			p, ok := model[k]
			if ok && !p.Live(now) {
				delete(model, k)
				return Pin{}, false
			}
			return p, ok
		}
		for i, op := range ops {
			k := keys[op>>3&7]
			now = now.Add(time.Duration(op>>6) * time.Second)
			switch op & 7 {
			case 0, 1, 2:
				p := Pin{Connection: string(rune('A' + i%4)), Created: now, LastUsed: now, Expires: now.Add(time.Duration(1+op&3) * time.Second)}
				if err := s.Save(k, p, now); err != nil {
					t.Fatal(err)
				}
				model[k] = p
			case 3, 4:
				got, ok, err := s.Load(k, now)
				want, wok := live(k)
				if err != nil || ok != wok || got != want {
					t.Fatalf("Load(%v) = %+v, %v, %v; want %+v, %v", k, got, ok, err, want, wok)
				}
			case 5:
				// A dead pin the store has not removed yet may count as
				// deleted; a live one must.
				ok, _ := s.Delete(k)
				_, wok := live(k)
				delete(model, k)
				if wok && !ok {
					t.Fatalf("Delete(%v) missed a live pin", k)
				}
			case 6:
				conn := string(rune('A' + i%4))
				ok, _ := s.DeleteIf(k, conn)
				if p, wok := live(k); wok && p.Connection == conn {
					delete(model, k)
					if !ok {
						t.Fatalf("DeleteIf(%v, %q) kept a matching live pin", k, conn)
					}
				} else if ok && wok {
					t.Fatalf("DeleteIf(%v, %q) removed a pin to %q", k, conn, p.Connection)
				}
			default:
				list, _ := s.List(now)
				var want []Entry
				for k := range model {
					if p, ok := live(k); ok {
						want = append(want, Entry{k, p})
					}
				}
				if len(list) != len(want) {
					t.Fatalf("List has %d pins, want %d", len(list), len(want))
				}
				for _, e := range list {
					if p, ok := model[e.Key]; !ok || p != e.Pin {
						t.Fatalf("listed %+v, want %+v", e, p)
					}
				}
			}
		}
	})
}
