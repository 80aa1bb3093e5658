package lease_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/routeguard/routeguard/lease"
)

func Example() {
	ctx := context.Background()
	now := time.Date(2026, 8, 12, 19, 30, 0, 0, time.UTC)
	leases := lease.New(lease.Config{})

	// The client makes its owner token once per session and sends it in
	// the lease header; the router keeps only its digest.
	token := "vlo_" + strings.Repeat("A", 43)
	owner, _ := lease.ParseOwner(token)

	h := lease.Holder{Owner: owner, APIKeyID: "key-1"}
	l, err := leases.AcquireAt(ctx, h, "openai", []string{"openai-a", "openai-b"}, now)
	fmt.Println(l.Connection, l.Generation, l.ExpiresAt.Sub(now), err)

	// Before dispatch, the router fences every request carrying the lease.
	h.Generation = l.Generation
	fmt.Println(leases.FenceAt(ctx, h, "openai-a", now.Add(time.Second)))
	old := lease.Holder{Owner: owner, APIKeyID: "key-1", Generation: l.Generation - 1}
	err = leases.FenceAt(ctx, old, "openai-a", now.Add(time.Second))
	fmt.Println(errors.Is(err, lease.ErrFenceStale), err)

	// Another owner finds no free connection on openai-a.
	other, _ := lease.ParseOwner("vlo_" + strings.Repeat("B", 43))
	_, err = leases.AcquireAt(ctx, lease.Holder{Owner: other, APIKeyID: "key-1"}, "openai", []string{"openai-a"}, now.Add(30*time.Second))
	var le *lease.Error
	if errors.As(err, &le) && le.Code == lease.CodeCapacityUnavailable {
		fmt.Println(le.Status, "retry after", le.RetryAfter)
	}
	// Output:
	// openai-a 1 2m0s <nil>
	// <nil>
	// true lease: LEASE_FENCE_STALE: stale lease generation
	// 429 retry after 1m30s
}

func ExampleStripHeaders() {
	h := http.Header{}
	h.Set("X-OmniRoute-Lease-Owner", "vlo_"+strings.Repeat("A", 43))
	h.Set("X-OmniRoute-Lease-Generation", "3")
	h.Set("Content-Type", "application/json")
	owner, gen, err := lease.ParseHeader(h)
	fmt.Println(owner == lease.OwnerHash{}, gen, err)
	lease.StripHeaders(h)
	fmt.Println(len(h), h.Get("Content-Type"))
	// Output:
	// false 3 <nil>
	// 1 application/json
}
