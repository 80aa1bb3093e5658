package main

import (
	"net/http"
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
