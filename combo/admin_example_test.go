package combo_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/routeguard/routeguard/breaker"
	"github.com/routeguard/routeguard/combo"
	"github.com/routeguard/routeguard/cooldown"
)

func ExampleNewAdmin() {
	admin := combo.NewAdmin(combo.AdminConfig{
		Breakers:  breaker.NewSet(breaker.Config{}),
		Cooldowns: cooldown.New(cooldown.Config{}),
		Authorize: func(r *http.Request) error {
			if r.Header.Get("Authorization") != "Bearer admin-secret" {
				return combo.ErrAdminUnauthorized
			}
			return nil
		},
	})
	mux := http.NewServeMux()
	mux.Handle("/api/", admin)

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
