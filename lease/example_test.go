package lease_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/routeguard/routeguard/lease"
)

func Example() {
	ctx := context.Background()
	now := time.Date(2026, 8, 12, 19, 30, 0, 0, time.UTC)
	leases := lease.New(lease.Config{})

	// The client makes its owner token once per session.
	token, _ := lease.NewOwner()
	owner, _ := lease.ParseOwner(token)

	l, res, err := leases.AcquireAt(ctx, lease.Claim{
		Owner: owner, APIKeyID: "key-1", Provider: "openai",
		Candidates: []string{"openai-a", "openai-b"},
	}, now)
	fmt.Println(res, l.Connection, l.Generation, l.ExpiresAt.Sub(now), err)

	// Before dispatch, the router fences every request carrying the lease.
	h := lease.Holder{Owner: owner, APIKeyID: "key-1", Generation: l.Generation}
	fmt.Println(leases.FenceAt(ctx, h, "openai-a", now.Add(time.Second)))
	old := lease.Holder{Owner: owner, APIKeyID: "key-1", Generation: l.Generation - 1}
	err = leases.FenceAt(ctx, old, "openai-a", now.Add(time.Second))
	fmt.Println(errors.Is(err, lease.ErrFenceStale), err)

	// Another owner finds no free connection on openai-a.
	other, _ := lease.ParseOwner("vlo_" + strings.Repeat("B", 43))
	_, _, err = leases.AcquireAt(ctx, lease.Claim{
		Owner: other, APIKeyID: "key-1", Provider: "openai", Candidates: []string{"openai-a"},
	}, now.Add(30*time.Second))
	var ce *lease.CapacityError
	if errors.As(err, &ce) {
		fmt.Println("retry after", ce.RetryAfter)
	}
	// Output:
	// ACQUIRED openai-a 1 2m0s <nil>
	// <nil>
	// true lease: stale lease generation
	// retry after 1m30s
}

func ExampleNewHandler() {
	leases := lease.New(lease.Config{})
	auth := lease.AuthenticatorFunc(func(r *http.Request) (lease.Caller, error) {
		if r.Header.Get("Authorization") != "Bearer secret" {
			return lease.Caller{}, lease.ErrAPIKeyInvalid
		}
		return lease.Caller{
			APIKeyID:           "key-1",
			Scopes:             []string{lease.ScopeExclusive},
			AllowedConnections: []string{"openai-a"},
		}, nil
	})
	now := time.Date(2026, 8, 12, 19, 30, 0, 0, time.UTC)
	mux := http.NewServeMux()
	mux.Handle(lease.Path, lease.NewHandler(leases, auth, &lease.HandlerOptions{
		Now: func() time.Time { return now },
	}))

	r := httptest.NewRequest(http.MethodPost, lease.Path, strings.NewReader(`{"action":"acquire","model":"openai/gpt-4o"}`))
	r.Header.Set("Authorization", "Bearer secret")
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-OmniRoute-Lease-Owner", "vlo_"+strings.Repeat("A", 43))
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, r)
	fmt.Print(w.Code, " ", w.Body.String())
	// Output:
	// 200 {"state":"ACTIVE","generation":1,"acquiredAt":"2026-08-12T19:30:00.000Z","renewedAt":"2026-08-12T19:30:00.000Z","expiresAt":"2026-08-12T19:32:00.000Z"}
}

func ExampleStripHeaders() {
	h := http.Header{}
	h.Set("X-OmniRoute-Lease-Owner", "vlo_"+strings.Repeat("A", 43))
	h.Set("X-OmniRoute-Lease-Generation", "3")
	h.Set("Content-Type", "application/json")
	owner, gen, err := lease.ParseHeader(h)
	fmt.Println(owner.IsZero(), gen, err)
	lease.StripHeaders(h)
	fmt.Println(len(h), h.Get("Content-Type"))
	// Output:
	// false 3 <nil>
	// 1 application/json
}
