package routeguard_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/combotest"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lockout"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Two providers behind one router: the first key is rate-limited, so the
// router cools it and the request falls back to the second provider; the
// next request skips the cooling key without calling it.
func Example() {
	primary, backup := combotest.New(), combotest.New()
	defer primary.Close()
	defer backup.Close()
	primary.Script("", combotest.RateLimited(30*time.Second))
	backup.Script("", combotest.OK("hello from the backup"))
	upstream := map[string]*combotest.Upstream{"primary": primary, "backup": backup}

	router := combo.New(combo.Config{
		Breakers:  breaker.NewSet(breaker.Config{}),
		Cooldowns: cooldown.New(cooldown.Config{}),
		Lockouts:  lockout.New(lockout.Config{Enabled: true}),
		Now:       func() time.Time { return time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC) },
	})
	smart := &combo.Combo{Name: "smart", Targets: []combo.Target{
		{Provider: "primary", Connection: "key-1", Model: "gpt-4o"},
		{Provider: "backup", Connection: "key-2", Model: "claude"},
	}}
	send := func(ctx context.Context, t *combo.Target) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://upstream.test/v1/chat/completions", http.NoBody)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+t.Connection)
		return upstream[t.Provider].Transport().RoundTrip(req)
	}

	for i := range 2 {
		fmt.Printf("request %d\n", i+1)
		res, err := router.Do(context.Background(), combo.Request{Combo: smart}, send)
		if err != nil {
			fmt.Println("error:", err)
			continue
		}
		_, _ = io.Copy(io.Discard, res.Response.Body)
		res.Response.Body.Close()
		for _, x := range res.Excluded {
			fmt.Printf("  %s/%s/%s: excluded, %s for %v\n", x.Provider, x.Connection, x.Model, x.Reason, x.RetryAfter)
		}
		for _, a := range res.Attempts {
			fmt.Printf("  %v: %s, status %d\n", &a.Target, a.Outcome, a.Status)
		}
		fmt.Println("  served by", res.Target.Provider)
	}
	fmt.Println("primary calls:", primary.Total())
	// Output:
	// request 1
	//   primary/key-1/gpt-4o: failed, status 429
	//   backup/key-2/claude: succeeded, status 200
	//   served by backup
	// request 2
	//   primary/key-1/gpt-4o: excluded, model_lockout for 30s
	//   backup/key-2/claude: succeeded, status 200
	//   served by backup
	// primary calls: 1
}
