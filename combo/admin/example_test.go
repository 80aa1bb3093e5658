package admin_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/combo/admin"
	"github.com/routeguard/routeguard/cooldown"
	"github.com/routeguard/routeguard/lease"
)

func ExampleNewLeaseHandler() {
	leases := lease.New(lease.Config{})
	auth := admin.LeaseAuthenticatorFunc(func(r *http.Request) (admin.LeaseCaller, error) {
		if r.Header.Get("Authorization") != "Bearer secret" {
			return admin.LeaseCaller{}, admin.ErrLeaseAPIKeyInvalid
		}
		return admin.LeaseCaller{
			APIKeyID:           "key-1",
			Scopes:             []string{admin.ScopeLeaseExclusive},
			AllowedConnections: []string{"openai-a"},
		}, nil
	})
	now := time.Date(2026, 8, 12, 19, 30, 0, 0, time.UTC)
	mux := http.NewServeMux()
	mux.Handle(admin.LeasePath, admin.NewLeaseHandler(leases, auth, admin.LeaseConfig{
		Now: func() time.Time { return now },
	}))

	r := httptest.NewRequest(http.MethodPost, admin.LeasePath, strings.NewReader(`{"action":"acquire","model":"openai/gpt-4o"}`))
	r.Header.Set("Authorization", "Bearer secret")
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-OmniRoute-Lease-Owner", "vlo_"+strings.Repeat("A", 43))
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, r)
	fmt.Print(w.Code, " ", w.Body.String())
	// Output:
	// 200 {"state":"ACTIVE","generation":1,"acquiredAt":"2026-08-12T19:30:00.000Z","renewedAt":"2026-08-12T19:30:00.000Z","expiresAt":"2026-08-12T19:32:00.000Z"}
}

func ExampleNew() {
	// The layers the router is built with (combo.New(layers)); the admin
	// API shows and steers the same layers.
	layers := combo.Config{
		Breakers:  breaker.NewSet(breaker.Config{}),
		Cooldowns: cooldown.New(cooldown.Config{}),
	}
	api := admin.New(admin.Config{
		Layers: layers,
		Authorize: func(r *http.Request) error {
			if r.Header.Get("Authorization") != "Bearer admin-secret" {
				return admin.ErrUnauthorized
			}
			return nil
		},
	})
	mux := http.NewServeMux()
	mux.Handle("/api/", api)

	send := func(method, path, auth, body string) {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		fmt.Print(rec.Code, " ", rec.Body.String())
	}
	send("GET", "/api/monitoring/health", "", "")
	send("POST", "/api/resilience/reset", "", "")
	send("POST", "/api/resilience/reset", "Bearer admin-secret", "")
	send("POST", "/api/resilience/cooldowns", "Bearer admin-secret", `{"connectionIds":["k1"],"force":true}`)
	// Output:
	// 200 {"status":"healthy"}
	// 401 {"error":"Unauthorized","code":"unauthorized"}
	// 200 {"ok":true,"resetCount":0,"message":"Reset 0 circuit breaker(s)"}
	// 400 {"error":"Unknown field \"force\"","code":"unknown_field"}
}
