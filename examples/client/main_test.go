package main

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestFallsBackThenSkipsTheCoolingKey runs the program and reads what it
// printed.
func TestFallsBackThenSkipsTheCoolingKey(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	stdout := os.Stdout
	os.Stdout = w
	main()
	os.Stdout = stdout
	require.NoError(t, w.Close())
	out, err := io.ReadAll(r)
	require.NoError(t, err)
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()

	assert.Equal(t, `call 1
  primary/key-1/gpt-4o: failed 503
  backup/key-2/claude: succeeded 200
  answer "Hello from the backup", error <nil>
call 2
  backup/key-2/claude: succeeded 200
  answer "Hello from the backup", error <nil>
`, string(out))
	assert.Equal(t, 1, strings.Count(string(out), "primary"), "the second call does not touch the cooling key")
}
