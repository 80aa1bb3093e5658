package watchdog

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzObserver feeds arbitrary bytes in two arbitrary chunkings and checks
// the parser's invariants.
func FuzzObserver(f *testing.F) {
	f.Add([]byte(chat("hello")+ping+chat("wörld")), uint64(1))
	f.Add([]byte(toolDelta+reasonSum+thinking+chat("answer")), uint64(2))
	f.Add([]byte("data: {\"choices\":[{\"delta\":\r\ndata: {\"content\":\"x\"}}]}\r\n\r\n"+comment), uint64(3))
	f.Add([]byte(respHello+usage+emptyDelta+chatDoneEvt), uint64(4))
	f.Add([]byte(strings.Repeat("x", 3000)+"\n\n"+chat("ok")), uint64(5))
	f.Add([]byte("\r\r\n\n\r\n\r\n\n"), uint64(6))
	f.Add([]byte("event: heartbeat\ndata: {}\n\ndata: {\"type\":\"Heartbeat\"}\n\n"+comment+chat("x")), uint64(7))
	f.Add([]byte("data: "+strings.Repeat("z", 2000)), uint64(8))
	cfg := Config{
		Throughput: true, Warmup: new(maxWarmup), Window: maxWindow,
		MaxEventBytes: minMaxEventBytes,
	}
	// Only the readiness timeout: events are parsed until the first one
	// that is not a heartbeat.
	readyCfg := Config{MaxEventBytes: minMaxEventBytes}
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		feed := func(o *Observer, rng *rand.Rand) {
			for rest := data; len(rest) > 0; {
				n := 1 + rng.IntN(len(rest))
				if rng.IntN(4) == 0 {
					n = min(len(rest), 1+rng.IntN(8))
				}
				if err := o.ObserveAt(rest[:n], t0); err != nil {
					t.Fatalf("unexpected abort: %v", err)
				}
				rest = rest[n:]
				if b := len(o.carry) + len(o.data); b > cfg.MaxEventBytes {
					t.Fatalf("buffered %d > limit %d", b, cfg.MaxEventBytes)
				}
				if cap(o.carry) > cfg.MaxEventBytes || cap(o.data) > cfg.MaxEventBytes {
					t.Fatalf("buffer capacity %d/%d > limit %d", cap(o.carry), cap(o.data), cfg.MaxEventBytes)
				}
			}
		}
		whole := NewObserver(cfg)
		if err := whole.ObserveAt(data, t0); err != nil {
			t.Fatalf("unexpected abort: %v", err)
		}
		a := NewObserver(cfg)
		feed(a, rand.New(rand.NewPCG(seed, 1)))
		b := NewObserver(cfg)
		feed(b, rand.New(rand.NewPCG(seed, 2)))
		w := whole.StatsAt(t0)
		if w.UsefulBytes > int64(len(data)) {
			t.Fatalf("useful %d > input %d", w.UsefulBytes, len(data))
		}
		for _, o := range []*Observer{a, b} {
			s := o.StatsAt(t0)
			if s.UsefulBytes != w.UsefulBytes || s.Events != w.Events || s.ProtectedPhase != w.ProtectedPhase ||
				s.Bytes != w.Bytes || (o.errEvent == nil) != (whole.errEvent == nil) || o.meaningful != whole.meaningful {
				t.Fatalf("chunking changed the result: whole %+v, split %+v", w, s)
			}
		}
		// Readiness alone sees the same first event, whatever the chunking.
		for i, seed2 := range []uint64{3, 4} {
			r := NewObserver(readyCfg)
			if i == 0 {
				if err := r.ObserveAt(data, t0); err != nil {
					t.Fatalf("unexpected abort: %v", err)
				}
			} else {
				rng := rand.New(rand.NewPCG(seed, seed2))
				for rest := data; len(rest) > 0; {
					n := 1 + rng.IntN(len(rest))
					if err := r.ObserveAt(rest[:n], t0); err != nil {
						t.Fatalf("unexpected abort: %v", err)
					}
					rest = rest[n:]
				}
			}
			if st := r.StatsAt(t0); st.EventSeen != whole.meaningful {
				t.Fatalf("readiness-only observer: event seen %v, full parser %v", st.EventSeen, whole.meaningful)
			}
		}
	})
}

// FuzzClassify compares the allocation-free scanner with a reference built
// on encoding/json.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{
		`{"choices":[{"delta":{"content":"hello","tool_calls":[]}}]}`,
		`{"type":"content_block_delta","delta":{"type":"text_delta","text":"Hi"}}`,
		`{"type":"response.output_text.delta","delta":"x\u00e9"}`,
		`{"content_block":{"type":"tool_use"}}`,
		`{"error":{"message":"boom"}}`,
		`{"choices":[{"text":"a","delta":{"reasoning":""}}],"choices":[]}`,
		`[1,{"a":null}]`, `{"a":1e400}`, `[DONE]`, `not json`, `{"delta":"a",}`,
	} {
		f.Add([]byte(s), "")
		f.Add([]byte(s), "thinking")
	}
	f.Fuzz(func(t *testing.T, data []byte, name string) {
		if len(name) > maxName {
			name = name[:maxName]
		}
		got := classify(data, []byte(name))
		if got.useful > int64(len(data)) {
			t.Fatalf("useful %d > input %d", got.useful, len(data))
		}
		if got.protected && got.useful != 0 {
			t.Fatalf("protected event with useful bytes: %+v", got)
		}
		want, comparable := refClassify(data, name)
		if comparable && got != want {
			t.Fatalf("classify(%q, %q) = %+v, reference %+v", data, name, got, want)
		}
	})
}

func refClassify(data []byte, name string) (eventInfo, bool) {
	var info eventInfo
	trimmed := bytes.TrimSpace(data)
	if !utf8.Valid(trimmed) || !utf8.ValidString(name) || nesting(trimmed) >= maxDepth {
		return info, false
	}
	var v any
	valid := false
	if len(trimmed) > 0 && string(trimmed) != "[DONE]" {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.UseNumber()
		valid = dec.Decode(&v) == nil && !dec.More()
		if valid {
			// Decode stops after the first value: the rest must be empty.
			var extra any
			valid = dec.Decode(&extra) != nil && dec.InputOffset() == int64(len(trimmed))
		}
	}
	root, isObj := v.(map[string]any)
	typeName := name
	if valid && isObj {
		if s, ok := root["type"].(string); ok && s != "" {
			if len(s) > 200 {
				return info, false
			}
			typeName = s
		}
	}
	lower := asciiLower(typeName)
	info.ping = lower == "ping" || lower == "heartbeat"
	info.isError = (valid && isObj && root["error"] != nil) || lower == "error" || lower == "response.failed"
	if !valid {
		return info, true
	}
	has := func(s string, words []string) bool {
		if len(s) > 200 {
			return false
		}
		s = asciiLower(s)
		for _, w := range words {
			if strings.Contains(s, w) {
				return true
			}
		}
		return false
	}
	if has(typeName, protectedTypeWords[:]) {
		info.protected = true
		return info, true
	}
	if !isObj {
		return info, true
	}
	var useful int64
	prot := false
	if choices, ok := root["choices"].([]any); ok {
		for _, c := range choices {
			cm, ok := c.(map[string]any)
			if !ok {
				continue
			}
			if s, ok := cm["text"].(string); ok {
				useful += int64(len(s))
			}
			d, ok := cm["delta"].(map[string]any)
			if !ok {
				continue
			}
			if s, ok := d["content"].(string); ok {
				useful += int64(len(s))
			}
			if s, ok := d["text"].(string); ok {
				useful += int64(len(s))
			}
			if tc, ok := d["tool_calls"].([]any); ok && len(tc) > 0 {
				prot = true
			}
			if fc, ok := d["function_call"]; ok && fc != nil {
				prot = true
			}
			for _, k := range []string{"reasoning", "reasoning_content"} {
				if s, ok := d[k].(string); ok && s != "" {
					prot = true
				}
			}
		}
	}
	switch d := root["delta"].(type) {
	case string:
		useful += int64(len(d))
	case map[string]any:
		if s, ok := d["text"].(string); ok {
			useful += int64(len(s))
		}
		if s, ok := d["type"].(string); ok {
			if len(s) > 200 {
				return info, false
			}
			prot = prot || has(s, protectedTypeWords[:])
		}
	}
	if cb, ok := root["content_block"].(map[string]any); ok {
		if s, ok := cb["type"].(string); ok {
			if len(s) > 200 {
				return info, false
			}
			prot = prot || has(s, protectedBlockWords[:])
		}
	}
	if prot {
		info.protected = true
		return info, true
	}
	info.useful = useful
	return info, true
}

// asciiLower lowers ASCII letters only, like the scanner.
func asciiLower(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}, s)
}

// nesting returns the maximum bracket depth, ignoring strings.
func nesting(b []byte) int {
	depth, most, inStr, esc := 0, 0, false, false
	for _, c := range b {
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case !inStr && (c == '{' || c == '['):
			depth++
			most = max(most, depth)
		case !inStr && (c == '}' || c == ']'):
			depth--
		}
	}
	return most
}

// FuzzConfigNormalize checks that Normalize always lands in range, is
// idempotent, never modifies its receiver and yields a Config Validate
// accepts.
func FuzzConfigNormalize(f *testing.F) {
	f.Add(true, int64(-1), int64(10), int64(0), int64(0), int64(0), int64(0), 0)
	f.Add(false, int64(0), int64(0), int64(1), int64(1), int64(-5), int64(9), 1<<40)
	f.Add(true, int64(1<<62), int64(-1<<62), int64(-1<<62), int64(1<<62), int64(1<<62), int64(-1), -1)
	f.Fuzz(func(t *testing.T, en bool, warm, win, rate, minB, idle, dl int64, maxEv int) {
		c := Config{
			Throughput: en, Window: time.Duration(win), MinBytesPerSecond: rate, MinBytes: minB,
			IdleTimeout:     time.Duration(idle),
			AttemptDeadline: time.Duration(dl),
			MaxEventBytes:   maxEv,
		}
		if warm%3 != 1 { // the warm-up is set two times out of three
			c.Warmup = new(time.Duration(warm))
		}
		if dl%2 != 0 { // the readiness timeout takes the deadline's value half of the time
			c.ReadinessTimeout = new(time.Duration(dl))
		}
		before := c
		var warmBefore, readyBefore time.Duration
		if c.Warmup != nil {
			warmBefore = *c.Warmup
		}
		if c.ReadinessTimeout != nil {
			readyBefore = *c.ReadinessTimeout
		}
		n := c.Normalize()
		if c != before || (c.Warmup != nil && *c.Warmup != warmBefore) || (c.ReadinessTimeout != nil && *c.ReadinessTimeout != readyBefore) {
			t.Fatalf("Normalize modified its receiver")
		}
		if n.Warmup == nil || n.ReadinessTimeout == nil || n.Warmup == c.Warmup || n.ReadinessTimeout == c.ReadinessTimeout {
			t.Fatalf("Normalize left a default unset or shared a pointer: %+v", n)
		}
		if m := n.Normalize(); *m.Warmup != *n.Warmup || *m.ReadinessTimeout != *n.ReadinessTimeout ||
			m.settings() != n.settings() {
			t.Fatalf("not idempotent: %+v then %+v", n, m)
		}
		if err := n.Validate(); err != nil {
			t.Fatalf("normalised config rejected: %v", err)
		}
		if n.Throughput != en || *n.Warmup < 0 || *n.Warmup > maxWarmup ||
			n.Window < minWindow || n.Window > maxWindow || n.MinBytesPerSecond < 1 || n.MinBytes < 1 {
			t.Fatalf("out of range: %+v", n)
		}
		if n.IdleTimeout < 0 || n.AttemptDeadline < 0 || n.MaxEventBytes < minMaxEventBytes || n.MaxEventBytes > maxMaxEventBytes {
			t.Fatalf("out of range: %+v", n)
		}
		if r := *n.ReadinessTimeout; r < 0 || r > maxReadinessTimeout || r != c.settings().readiness {
			t.Fatalf("readiness out of range: %v → %v", c.ReadinessTimeout, r)
		}
	})
}

// FuzzFromEnv checks that any environment yields a usable Config whose
// refusals each name their variable and leave nothing behind.
func FuzzFromEnv(f *testing.F) {
	f.Add("true", "0", "2000", "5", "20", "125000", "300000")
	f.Add("maybe", "-1", "999", "0", "x", "", " 7 ")
	f.Fuzz(func(t *testing.T, en, warm, win, rate, minB, idle, dl string) {
		m := map[string]string{
			envEnabled: en, envWarmupMs: warm, envWindowMs: win, envMinBytesPerSecond: rate,
			envMinBytes: minB, envIdleTimeoutMs: idle, envAttemptTimeoutMs: dl, envReadinessTimeoutMs: dl,
		}
		c, err := FromEnv(func(k string) (string, bool) { v, ok := m[k]; return v, ok })
		if verr := c.Validate(); verr != nil {
			t.Fatalf("FromEnv(%q) = %+v, which Validate refuses: %v", m, c, verr)
		}
		var errs []error
		if err != nil {
			errs = err.(interface{ Unwrap() []error }).Unwrap()
		}
		for _, e := range errs {
			var we *Error
			if !errors.As(e, &we) || we.Code != CodeInvalidConfig || !errors.Is(e, ErrInvalidConfig) {
				t.Fatalf("refusal %v is not an invalid_config *Error", e)
			}
			if _, ok := m[we.Field]; !ok {
				t.Fatalf("refusal names %q", we.Field)
			}
		}
		n := c.Normalize()
		if r := *n.ReadinessTimeout; r < 0 || r > maxReadinessTimeout {
			t.Fatalf("readiness %v out of range", r)
		}
	})
}

// FuzzFindErrorEvent checks that any stream is scanned without panicking and
// that a found event's data came from the stream.
func FuzzFindErrorEvent(f *testing.F) {
	f.Add([]byte("event: error\ndata: {\"error\":{\"message\":\"x\",\"status\":503}}\n\n"))
	f.Add([]byte("data: {\"type\":\"response.failed\",\"response\":{\"error\":{\"code\":1}}}"))
	f.Add([]byte(chat("a")))
	f.Fuzz(func(t *testing.T, stream []byte) {
		ev, ok := FindErrorEvent(stream)
		if !ok {
			return
		}
		if len(ev.Data) > len(stream) {
			t.Fatalf("data longer than the stream")
		}
		if ev.Status != 0 && (ev.Status < 100 || ev.Status > 599) {
			t.Fatalf("status %d", ev.Status)
		}
		if sse := ev.SSE(); len(sse) <= defaultMaxEventBytes {
			again, ok := FindErrorEvent(sse)
			if !ok || again.Event != ev.Event || !bytes.Equal(again.Data, ev.Data) {
				t.Fatalf("SSE round trip: %q gives %+v, %v; want %+v", sse, again, ok, ev)
			}
		}
	})
}
