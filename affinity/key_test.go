package affinity

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestNewKey(t *testing.T) {
	tests := []struct {
		name   string
		value  string
		want   string
		wantOK bool
	}{
		{"safe kept", "abc-1.2_3:x", "header:abc-1.2_3:x", true},
		{"trimmed", "  abc \t", "header:abc", true},
		{"empty", "", "", false},
		{"whitespace only", " \t\n ", "", false},
		{"180 safe kept", strings.Repeat("a", 180), "header:" + strings.Repeat("a", 180), true},
		{"181 hashed", strings.Repeat("a", 181), "header:sha256:" + sha(strings.Repeat("a", 181)), true},
		{"unsafe hashed", "a b", "header:sha256:" + sha("a b"), true},
		{"slash hashed", "a/b", "header:sha256:" + sha("a/b"), true},
		{"unicode hashed", "sesión", "header:sha256:" + sha("sesión"), true},
		{"hash of trimmed", " a b ", "header:sha256:" + sha("a b"), true},
		{"4096 accepted", strings.Repeat("x", 4096), "header:sha256:" + sha(strings.Repeat("x", 4096)), true},
		{"4097 refused", strings.Repeat("x", 4097), "", false},
		{"4097 with spaces refused before trim", strings.Repeat("x", 4095) + "  ", "", false},
		{"4096 runes of 2 bytes accepted", strings.Repeat("é", 4096), "header:sha256:" + sha(strings.Repeat("é", 4096)), true},
		{"4097 runes refused", strings.Repeat("é", 4097), "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, ok := NewKey("header", tt.value)
			require.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.want, k.name)
			if ok {
				assert.Equal(t, sha256.Sum256([]byte(tt.want)), k.Digest())
				assert.Equal(t, "header", k.Source())
			} else {
				assert.True(t, k.IsZero())
			}
		})
	}
}

func TestKeyNeverPrintsValue(t *testing.T) {
	const secret = "my-secret-session-0123456789"
	k, ok := NewKey("header", secret)
	require.True(t, ok)
	want := "header~" + sha("header:" + secret)[:8]
	assert.Equal(t, want, k.String())
	for _, s := range []string{
		fmt.Sprint(k), fmt.Sprintf("%v %+v %#v %s", k, k, k, k),
		k.LogValue().String(), StoreKey{Provider: "p", Session: k.Digest()}.String(),
	} {
		assert.NotContains(t, s, secret)
		assert.NotContains(t, s, "my-secret")
	}
	var buf strings.Builder
	slog.New(slog.NewTextHandler(&buf, nil)).Info("pin", "session", k)
	assert.NotContains(t, buf.String(), "secret")
	assert.Contains(t, buf.String(), want)
	assert.Equal(t, "", Key{}.String())
	assert.Equal(t, "", Key{}.Source())
}

// Scenario 1: the codex header wins over x-session-id.
func TestKeyFromHeaderPrecedence(t *testing.T) {
	h := http.Header{}
	h.Set("x-codex-session-id", "abc")
	h.Set("x-session-id", "zzz")
	h.Set("x-omniroute-session", "ooo")
	k, ok := KeyFrom(h, []byte(`{"metadata":{"session_id":"s1"}}`))
	require.True(t, ok)
	assert.Equal(t, "header:abc", k.name)

	h.Del("x-codex-session-id")
	k, _ = KeyFrom(h, nil)
	assert.Equal(t, "header:zzz", k.name)

	h.Del("x-session-id")
	k, _ = KeyFrom(h, nil)
	assert.Equal(t, "header:ooo", k.name)
}

// Scenario 2: 181 characters are hashed, 180 are kept.
func TestKeyFromHeaderLength(t *testing.T) {
	h := http.Header{}
	h.Set("x-session-id", strings.Repeat("a", 181))
	k, ok := KeyFrom(h, nil)
	require.True(t, ok)
	assert.Equal(t, "header:sha256:"+sha(strings.Repeat("a", 181)), k.name)
	assert.Len(t, k.name, len("header:sha256:")+64)

	h.Set("x-session-id", strings.Repeat("a", 180))
	k, ok = KeyFrom(h, nil)
	require.True(t, ok)
	assert.Equal(t, "header:"+strings.Repeat("a", 180), k.name)
}

// Scenario 3: a whitespace-only header falls through to the body.
func TestKeyFromBlankHeaderUsesBody(t *testing.T) {
	h := http.Header{}
	h.Set("x-session-id", "   ")
	k, ok := KeyFrom(h, []byte(`{"metadata":{"session_id":"s1"}}`))
	require.True(t, ok)
	assert.Equal(t, "metadata:s1", k.name)
}

func TestKeyFromFirstPresentHeaderDecides(t *testing.T) {
	// A present but blank first header sends the search to the body, not to
	// the next header.
	h := http.Header{}
	h.Set("x-codex-session-id", "  ")
	h.Set("x-session-id", "zzz")
	k, ok := KeyFrom(h, []byte(`{"session_id":"b"}`))
	require.True(t, ok)
	assert.Equal(t, "session:b", k.name)

	// An empty value counts as absent.
	h.Set("x-codex-session-id", "")
	k, ok = KeyFrom(h, nil)
	require.True(t, ok)
	assert.Equal(t, "header:zzz", k.name)

	// Too long: refused, body next.
	h.Set("x-codex-session-id", strings.Repeat("a", 4097))
	_, ok = KeyFrom(h, nil)
	assert.False(t, ok)
}

func TestExtractorCustomHeaders(t *testing.T) {
	e := &Extractor{Headers: []string{"x-my-session", "X-Other"}}
	h := http.Header{}
	h.Set("X-Other", "two")
	h.Set("x-my-session", "one")
	k, ok := e.KeyFrom(h, nil)
	require.True(t, ok)
	assert.Equal(t, "header:one", k.name)

	h.Set("x-omniroute-session", "builtin")
	k, _ = e.KeyFrom(h, nil)
	assert.Equal(t, "header:builtin", k.name, "built-in headers come first")

	_, ok = KeyFrom(http.Header{"X-My-Session": {"one"}}, nil)
	assert.False(t, ok, "custom names are not read by the zero Extractor")

	k, ok = e.KeyFrom(http.Header{"X-Other": {"o"}}, nil)
	require.True(t, ok)
	assert.Equal(t, "header:o", k.name)
	_, ok = e.KeyFrom(nil, nil)
	assert.False(t, ok)
}

func TestStripHeaders(t *testing.T) {
	h := http.Header{}
	for _, n := range []string{"x-codex-session-id", "x-session-id", "x-omniroute-session", "x-my-session", "Authorization"} {
		h.Set(n, "v")
	}
	StripHeaders(h)
	assert.Equal(t, http.Header{"X-My-Session": {"v"}, "Authorization": {"v"}}, h)

	e := &Extractor{Headers: []string{"x-my-session"}}
	e.StripHeaders(h)
	assert.Equal(t, http.Header{"Authorization": {"v"}}, h)
	StripHeaders(nil)
}
