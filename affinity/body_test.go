package affinity

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestKeyFromBody(t *testing.T) {
	long := strings.Repeat("p", 5000)
	tests := []struct {
		name string
		body string
		want string // "" means no key
	}{
		// Scenario 4: first user message, system skipped.
		{"first user message", `{"messages":[{"role":"system","content":"S"},{"role":"user","content":"hello"}]}`, "input:sha256:" + sha("hello")},
		// Scenario 5: image-only content yields no key.
		{"image only", `{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, ""},

		{"metadata.session_id", `{"metadata":{"session_id":"s1","sessionId":"s2"},"session_id":"x"}`, "metadata:s1"},
		{"metadata.sessionId", `{"metadata":{"sessionId":"s2"},"conversation_id":"c"}`, "metadata:s2"},
		{"metadata blank falls through", `{"metadata":{"session_id":"  ","sessionId":"s2"}}`, "metadata:s2"},
		{"metadata non-string ignored", `{"metadata":{"session_id":42},"conversation_id":"c"}`, "conversation:c"},
		{"metadata not object", `{"metadata":"s","session_id":"x"}`, "session:x"},
		{"conversation_id", `{"conversation_id":"c1","session_id":"s","prompt_cache_key":"p"}`, "conversation:c1"},
		{"session_id", `{"session_id":"s","prompt_cache_key":"p"}`, "session:s"},
		{"prompt_cache_key", `{"prompt_cache_key":"pk","messages":[{"role":"user","content":"hi"}]}`, "prompt-cache:pk"},
		{"unsafe id hashed", `{"session_id":"a b"}`, "session:sha256:" + sha("a b")},
		{"field names exact", `{"Session_ID":"s","prompt":"q"}`, "input:sha256:" + sha("q")},
		{"null field ignored", `{"session_id":null,"prompt":"q"}`, "input:sha256:" + sha("q")},
		{"duplicate field last wins", `{"session_id":"a","session_id":"b"}`, "session:b"},

		// Claude Code user_id.
		{"claude-code", `{"metadata":{"user_id":"{\"session_id\":\"cc1\"}"},"conversation_id":"c"}`, "claude-code:cc1"},
		{"metadata.session_id beats claude-code", `{"metadata":{"user_id":"{\"session_id\":\"cc1\"}","session_id":"m"}}`, "metadata:m"},
		{"claude-code malformed", `{"metadata":{"user_id":"{not json"},"prompt":"q"}`, "input:sha256:" + sha("q")},
		{"claude-code not string session", `{"metadata":{"user_id":"{\"session_id\":7}"},"prompt":"q"}`, "input:sha256:" + sha("q")},
		{"claude-code no session", `{"metadata":{"user_id":"{\"user\":\"u\"}"},"prompt":"q"}`, "input:sha256:" + sha("q")},
		{"claude-code plain user id", `{"metadata":{"user_id":"user_123"},"prompt":"q"}`, "input:sha256:" + sha("q")},
		{"claude-code 5000 chars", `{"metadata":{"user_id":"{\"session_id\":\"x\",\"pad\":\"` + strings.Repeat("a", 5000) + `\"}"},"prompt":"q"}`, "input:sha256:" + sha("q")},

		// First input text.
		{"input string", `{"input":"hi there"}`, "input:sha256:" + sha("hi there")},
		{"input blank", `{"input":"   ","prompt":"p"}`, "input:sha256:" + sha("p")},
		{"input array content", `{"input":[{"role":"developer","content":[{"type":"input_image"}]},{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]}]}`, "input:sha256:" + sha("a\nb")},
		{"input array strings", `{"input":["x","y"]}`, "input:sha256:" + sha("x")},
		{"input array object text", `{"input":[{"type":"input_text","text":"t"}]}`, "input:sha256:" + sha("t")},
		{"input beats messages", `{"input":"i","messages":[{"role":"user","content":"m"}]}`, "input:sha256:" + sha("i")},
		{"messages no user uses first", `{"messages":[{"role":"system","content":"sys"},{"role":"assistant","content":"a"}]}`, "input:sha256:" + sha("sys")},
		{"messages content parts", `{"messages":[{"role":"user","content":[{"type":"text","text":"one"},{"type":"image_url"},"two",{"content":"three"}]}]}`, "input:sha256:" + sha("one\ntwo\nthree")},
		{"messages user empty falls to prompt", `{"messages":[{"role":"user","content":""}],"prompt":"p"}`, "input:sha256:" + sha("p")},
		{"gemini contents", `{"contents":[{"role":"model","parts":[{"text":"m"}]},{"role":"user","parts":[{"text":"g1"},{"text":"g2"}]}]}`, "input:sha256:" + sha("g1\ng2")},
		{"gemini contents no role", `{"contents":[{"parts":[{"text":"g"}]}]}`, "input:sha256:" + sha("g")},
		{"prompt", `{"prompt":"p"}`, "input:sha256:" + sha("p")},
		{"query", `{"query":"q","instruction":"i"}`, "input:sha256:" + sha("q")},
		{"instruction", `{"instruction":"i"}`, "input:sha256:" + sha("i")},
		{"prompt object", `{"prompt":{"text":"pt"}}`, "input:sha256:" + sha("pt")},
		{"prompt long cut", `{"prompt":"` + long + `"}`, "input:sha256:" + sha(long[:4096])},
		{"not serialised", `{"prompt":{"other":"x"},"query":42}`, ""},

		// Not an object.
		{"empty", ``, ""},
		{"array", `["a"]`, ""},
		{"invalid", `{"session_id":"a"`, ""},
		{"null", `null`, ""},
		{"leading space", "  \n{\"session_id\":\"a\"}", "session:a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e Extractor
			k, ok := e.KeyFromBody([]byte(tt.body))
			assert.Equal(t, tt.want != "", ok)
			assert.Equal(t, tt.want, k.name)
		})
	}
}

func TestFirstTurnKeyIsStable(t *testing.T) {
	turn1 := `{"messages":[{"role":"system","content":"S"},{"role":"user","content":"plan a trip"}]}`
	turn3 := `{"messages":[{"role":"system","content":"S"},{"role":"user","content":"plan a trip"},{"role":"assistant","content":"ok"},{"role":"user","content":"and hotels"}]}`
	k1, ok1 := KeyFrom(nil, []byte(turn1))
	k3, ok3 := KeyFrom(nil, []byte(turn3))
	assert.True(t, ok1 && ok3)
	assert.Equal(t, k1, k3)
}

func TestJoinTextBudget(t *testing.T) {
	a := strings.Repeat("a", 4000)
	b := strings.Repeat("b", 200)
	var sc scratch
	got := string(sc.joinText([]byte(`["` + a + `","` + b + `","c"]`)))
	assert.Equal(t, a+"\n"+b[:95], got)
	assert.Equal(t, 4096, len(got))

	// Texts that share their first 4096 characters share a key, by design.
	k1, _ := KeyFrom(nil, []byte(`{"prompt":"`+strings.Repeat("z", 4096)+`tail1"}`))
	k2, _ := KeyFrom(nil, []byte(`{"prompt":"`+strings.Repeat("z", 4096)+`tail2"}`))
	assert.Equal(t, k1, k2)
}

func TestCutChars(t *testing.T) {
	for _, tt := range []struct {
		in, want string
		n, count int
	}{{"ééé", "éé", 2, 2}, {"ab", "ab", 5, 2}, {"ab", "", 0, 0}} {
		got, count := cutPlain([]byte(tt.in), tt.n)
		assert.Equal(t, tt.want, string(got))
		assert.Equal(t, tt.count, count)
	}
}

func TestTextDepthBounded(t *testing.T) {
	body := `{"prompt":` + strings.Repeat(`{"content":`, 20) + `"deep"` + strings.Repeat(`}`, 20) + `}`
	_, ok := KeyFrom(nil, []byte(body))
	assert.False(t, ok)
	body = `{"prompt":` + strings.Repeat(`{"content":`, 3) + `"deep"` + strings.Repeat(`}`, 3) + `}`
	k, ok := KeyFrom(nil, []byte(body))
	assert.True(t, ok)
	assert.Equal(t, "input:sha256:"+sha("deep"), k.name)
}
