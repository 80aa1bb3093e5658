package combotest_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/routeguard/routeguard/combo/combotest"
)

func TestCut(t *testing.T) {
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	s := combotest.TextStream(0, "héllo", " world")
	enc := s.Stream.Encoded()
	for _, n := range []int{1, 10, strings.Index(enc, "é") + 1, len(enc) - 1} {
		u := combotest.New()
		u.Script("", combotest.Cut(s, n), combotest.Cut(s, n))

		// In process: the body breaks off with a connection reset.
		req, _ := http.NewRequest(http.MethodPost, "http://x/v1/chat/completions", strings.NewReader("{}"))
		resp, err := u.Transport().RoundTrip(req)
		require.NoError(t, err)
		got, err := io.ReadAll(resp.Body)
		assert.True(t, errors.Is(err, syscall.ECONNRESET), "cut at %d: %v", n, err)
		assert.Equal(t, enc[:n], string(got))

		// Over loopback: the connection is aborted after the bytes.
		resp, err = http.Post(u.URL()+"/v1/chat/completions", "application/json", strings.NewReader("{}"))
		require.NoError(t, err)
		got, err = io.ReadAll(resp.Body)
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF, "cut at %d", n)
		assert.Equal(t, enc[:n], string(got))
		resp.Body.Close()
		u.Close()
	}
	// At or past its length a stream is whole.
	assert.Equal(t, s, combotest.Cut(s, 0))
	u := combotest.New()
	defer u.Close()
	u.Script("", combotest.Cut(s, len(enc)))
	req, _ := http.NewRequest(http.MethodPost, "http://x/", strings.NewReader("{}"))
	resp, err := u.Transport().RoundTrip(req)
	require.NoError(t, err)
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, enc, string(got))
}
