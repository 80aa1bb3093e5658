package main

import (
	"bytes"
	"net/http"
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The first call falls back from the failing primary to the backup and cools
// the primary's key; the second call skips that key without calling it.
func Example() {
	main()
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	// Output:
	// call 1
	//   primary/key-1/gpt-4o: failed 503
	//   backup/key-2/claude: succeeded 200
	//   answer "Hello from the backup", error <nil>
	// call 2
	//   backup/key-2/claude: succeeded 200
	//   answer "Hello from the backup", error <nil>
}

// The whole client, routing included, stays under 60 lines.
func TestClientIsShort(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(src, []byte("\n")); n >= 60 {
		t.Errorf("main.go has %d lines, want fewer than 60", n)
	}
}
