package jsonscan

import (
	"encoding/json"
	"strings"
	"testing"
)

var validCases = []struct {
	in   string
	want bool
}{
	{`{}`, true},
	{` {"a":1} `, true},
	{`[1,2.5,-0,1e5,1E+2,-3.25e-7,true,false,null,"x"]`, true},
	{`"\u00e9\ud83d\ude00\n\t\"\\\/\b\f\r"`, true},
	{"\"\xff\xfe\"", true},
	{`{"a":[{"b":{}}],"c":""}`, true},
	{``, false},
	{` `, false},
	{`{`, false},
	{`{"a"}`, false},
	{`{"a":1,}`, false},
	{`[1,]`, false},
	{`01`, false},
	{`1.`, false},
	{`1e`, false},
	{`-`, false},
	{`.5`, false},
	{`+1`, false},
	{`tru`, false},
	{`nul`, false},
	{`"a`, false},
	{`"\x"`, false},
	{`"\u12g4"`, false},
	{"\"a\x01\"", false},
	{`{} {}`, false},
	{`{"a":1 "b":2}`, false},
	{`{1:2}`, false},
	{`[1 2]`, false},
	{strings.Repeat("[", 10000) + strings.Repeat("]", 10000), true},
	{strings.Repeat("[", 10001) + strings.Repeat("]", 10001), false},
}

func TestValid(t *testing.T) {
	for _, tt := range validCases {
		if got := Valid([]byte(tt.in)); got != tt.want {
			t.Errorf("Valid(%.40q) = %v, want %v", tt.in, got, tt.want)
		}
		if std := json.Valid([]byte(tt.in)); std != tt.want {
			t.Errorf("case %.40q: encoding/json says %v", tt.in, std)
		}
	}
}

func TestLookupLastWins(t *testing.T) {
	doc := []byte(`{"model":"a", "x":{"model":"inner"}, "mod\u0065l" : "b" ,"m":1}`)
	if got := string(Lookup(doc, "model")); got != `"b"` {
		t.Fatalf("Lookup = %s, want \"b\"", got)
	}
	if got := Lookup(doc, "absent"); got != nil {
		t.Fatalf("Lookup(absent) = %s", got)
	}
	if got := string(Lookup(doc, "x")); got != `{"model":"inner"}` {
		t.Fatalf("Lookup(x) = %s", got)
	}
	if got := Lookup([]byte(`[1]`), "x"); got != nil {
		t.Fatalf("Lookup on an array = %s", got)
	}
}

func TestAppendStringMax(t *testing.T) {
	got, n := AppendString(nil, []byte(`"h\u00e9llo"`), 2)
	if string(got) != "hé" || n != 2 {
		t.Fatalf("AppendString max 2 = %q, %d", got, n)
	}
	got, n = AppendString(nil, []byte(`"\ud800x"`), -1)
	if string(got) != "\ufffdx" || n != 2 {
		t.Fatalf("lone surrogate = %q, %d", got, n)
	}
}

// FuzzScan checks the validator, the string decoder and Lookup against
// encoding/json.
func FuzzScan(f *testing.F) {
	for _, tt := range validCases {
		if len(tt.in) < 200 {
			f.Add([]byte(tt.in))
		}
	}
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi\n"}],"model":"\u006d2"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		valid := Valid(b)
		if valid != json.Valid(b) {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", b, valid, !valid)
		}
		if !valid {
			return
		}
		i := Space(b, 0)
		if end := End(b, i); Space(b, end) != len(b) {
			t.Fatalf("End(%q) = %d", b, end)
		}
		switch b[i] {
		case '"':
			var want string
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			raw := b[i:End(b, i)]
			got, n := AppendString(nil, raw, -1)
			if string(got) != want || n != len([]rune(want)) {
				t.Fatalf("AppendString(%q) = %q (%d), want %q", raw, got, n, want)
			}
			if IsPlain(raw) && string(raw[1:len(raw)-1]) != want {
				t.Fatalf("IsPlain(%q) but decodes to %q", raw, want)
			}
		case '{':
			var m map[string]json.RawMessage
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			obj := b[i:End(b, i)]
			for k, v := range m {
				if got := Lookup(obj, k); string(got) != string(v) {
					t.Fatalf("Lookup(%q) = %q, want %q", k, got, v)
				}
			}
			for ks, i := 0, 1; ; {
				ks0, ke, _, ve, ok := Member(obj, i)
				if !ok {
					if ks != len(m) && len(m) > ks {
						t.Fatalf("walked %d members, decoded %d keys", ks, len(m))
					}
					break
				}
				var k string
				if err := json.Unmarshal(obj[ks0:ke], &k); err != nil {
					t.Fatal(err)
				}
				if !KeyIs(obj[ks0:ke], k) {
					t.Fatalf("KeyIs(%q, %q) = false", obj[ks0:ke], k)
				}
				if _, ok := m[k]; !ok {
					t.Fatalf("member %q not decoded", k)
				}
				ks++
				i = ve
			}
		}
	})
}

func BenchmarkValid(b *testing.B) {
	doc := []byte(`{"model":"bench","messages":[{"role":"system","content":"` + strings.Repeat("You are helpful. ", 40) +
		`"},{"role":"user","content":"` + strings.Repeat("Tell me about \\\"routing\\\".\\n", 40) + `"}],"stream":false,"temperature":0.7}`)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if !Valid(doc) {
			b.Fatal("invalid")
		}
	}
}

func BenchmarkValidStd(b *testing.B) {
	doc := []byte(`{"model":"bench","messages":[{"role":"system","content":"` + strings.Repeat("You are helpful. ", 40) +
		`"},{"role":"user","content":"` + strings.Repeat("Tell me about \\\"routing\\\".\\n", 40) + `"}],"stream":false,"temperature":0.7}`)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if !json.Valid(doc) {
			b.Fatal("invalid")
		}
	}
}

// typicalBody is a 2 KB chat request: a system prompt, one user message
// with a line break every sentence or so, and a few settings.
var typicalBody = []byte(`{"model":"bench","messages":[{"role":"system","content":"` +
	strings.Repeat("You are a helpful assistant who answers briefly. ", 16) +
	`"},{"role":"user","content":"` +
	strings.Repeat(`Please summarise the attached notes on request routing and retries.\n`, 16) +
	`"}],"stream":false,"temperature":0.7,"max_tokens":512}`)

func BenchmarkValidTypical(b *testing.B) {
	b.SetBytes(int64(len(typicalBody)))
	b.ReportAllocs()
	for b.Loop() {
		if !Valid(typicalBody) {
			b.Fatal("invalid")
		}
	}
}
