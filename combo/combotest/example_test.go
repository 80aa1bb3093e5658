package combotest_test

import (
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/routeguard/routeguard/combo/combotest"
)

func Example() {
	u := combotest.New()
	defer u.Close()
	// The key sk-a fails once with 503, then answers; other keys get 200.
	u.Script("sk-a", combotest.Error(http.StatusServiceUnavailable, "overloaded"), combotest.OK("hello"))

	client := &http.Client{Transport: u.Transport()}
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, "http://openai.test/v1/chat/completions", nil)
		req.Header.Set("Authorization", "Bearer sk-a")
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode)
	}
	fmt.Println("calls for sk-a:", u.Count("sk-a"))
	// Output:
	// 503
	// 200
	// calls for sk-a: 2
}

// Chaos mode for a soak test: the same seed gives the same faults on every
// run.
func ExampleUpstream_Chaos() {
	u := combotest.New()
	defer u.Close()
	u.Chaos(combotest.Chaos{Seed: 10, ServerError: 0.2, RateLimit: 0.1, Reset: 0.1, RetryAfter: 2 * time.Second})

	client := &http.Client{Transport: u.Transport()}
	for range 10 {
		req, _ := http.NewRequest(http.MethodPost, "http://openai.test/v1/chat/completions", nil)
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println("connection reset")
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			fmt.Println(resp.StatusCode, "retry after", ra)
			continue
		}
		fmt.Println(resp.StatusCode)
	}
	f := u.Faults()
	fmt.Printf("503: %d, 429: %d, resets: %d of %d calls\n", f.ServerError, f.RateLimit, f.Reset, u.Total())
	// Output:
	// connection reset
	// 503
	// 200
	// 200
	// 200
	// 429 retry after 2
	// 503
	// 429 retry after 2
	// 200
	// 200
	// 503: 2, 429: 2, resets: 1 of 10 calls
}
