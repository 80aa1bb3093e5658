package affinity

import (
	"strings"
	"testing"
)

// diffSeeds are bodies on the edges of the scan: escapes in names and
// values, invalid UTF-8, duplicate fields, budgets and depth.
var diffSeeds = []string{
	`{"messages":[{"role":"system","content":"S"},{"role":"user","content":"hello"}]}`,
	`{"mess\u0061ges":[{"r\u006fle":"\u0075ser","content":"h\u00e9\nllo \ud83d\ude00"}]}`,
	`{"messages":[{"role":"user","content":"a"}],"messages":[{"role":"user","content":"b"}]}`,
	`{"messages":[{"role":"assistant","content":"first"},{"role":"tool"}]}`,
	`{"messages":[1,{"role":"user"}],"prompt":"p"}`,
	`{"messages":[],"contents":[{"parts":[{"text":"g"},"h",{"content":"c"},{"text":7,"content":"d"}]}]}`,
	"{\"prompt\":\"\xff\xfe abc\"}",
	"{\"prompt\":\"\\ud800\\udc00\\ud800x\"}",
	`{"input":[],"prompt":"after empty input"}`,
	`{"input":[{"content":null},{"text":"t"}]}`,
	`{"input":{"parts":[" ","\t"]},"query":"q"}`,
	`{"metadata":{"user_id":" {\"session_id\":\"cc\"} "},"session_id":"s"}`,
	`{"metadata":{"user_id":"\u00a0{\"session_id\":\"cc\"}"}}`,
	`{"metadata":{"session_id":"\u0020\u0009"}, "conversation_id":"c"}`,
	`{"prompt":"` + strings.Repeat("é", 5000) + `"}`,
	`{"prompt":["` + strings.Repeat("a", 4095) + `","b","c"]}`,
	`{"prompt":["` + strings.Repeat("\\u00e9", 3000) + `","` + strings.Repeat("z", 2000) + `"]}`,
	`{"prompt":` + strings.Repeat(`{"text":`, 9) + `"deep"` + strings.Repeat(`}`, 9) + `}`,
	`{"prompt":` + strings.Repeat(`{"text":`, 8) + `"deep"` + strings.Repeat(`}`, 8) + `}`,
	`{"prompt":"\u2028\u3000"}`,
	`{"prompt":"\u0085x"}`,
	` {"session_id":"a"} `,
	`{"session_id":"a"} x`,
	`{"session_id":"a",}`,
	`{"a":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`,
}

// FuzzKeyFromBodyDiff checks the streaming scan against the whole-document
// decoding it replaced: the same key, or none, for every body.
func FuzzKeyFromBodyDiff(f *testing.F) {
	for _, s := range diffSeeds {
		f.Add("", []byte(s))
	}
	f.Fuzz(func(t *testing.T, _ string, body []byte) {
		var e Extractor
		got, ok := e.KeyFromBody(body)
		want, wantOK := refKeyFromBody(body)
		if ok != wantOK || got != want {
			t.Fatalf("KeyFromBody(%q) = %q, %v; the whole-document decoding gives %q, %v", body, got.name, ok, want.name, wantOK)
		}
	})
}

// typicalChatBody is a 2 KB chat request without session fields: a system
// prompt, one user message with line breaks, the model and settings.
var typicalChatBody = []byte(`{"model":"gpt-4o","stream":true,"temperature":0.7,"max_tokens":512,"messages":[` +
	`{"role":"system","content":"` + strings.Repeat("You are a helpful assistant who answers briefly. ", 16) + `"},` +
	`{"role":"user","content":"` + strings.Repeat(`Please summarise the notes on request routing and retries.\n`, 18) + `"}]}`)

func BenchmarkKeyFromBodyTypical(b *testing.B) {
	for _, bm := range []struct {
		name string
		fn   func([]byte) (Key, bool)
	}{
		{"scan", new(Extractor).KeyFromBody},
		{"decode", refKeyFromBody}, // the implementation before the scan
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(typicalChatBody)))
			for b.Loop() {
				if _, ok := bm.fn(typicalChatBody); !ok {
					b.Fatal("no key")
				}
			}
		})
	}
}
