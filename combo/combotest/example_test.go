package combotest_test

import (
	"fmt"
	"io"
	"net/http"

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
