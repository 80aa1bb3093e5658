package redisstate_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/routeguard/routeguard/combo/redisstate"
	"github.com/routeguard/routeguard/lease"
)

// Example shares leases and a concurrency cap through Redis (here a
// miniredis).
func Example() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
	defer rdb.Close()

	rs, err := redisstate.New(rdb, redisstate.Config{Replica: "gw-1"})
	if err != nil {
		panic(err)
	}
	ctx, now := context.Background(), time.Now()

	leases := lease.New(lease.Config{Store: rs.Leases()})
	owner := lease.HashOwner("vlo_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	l, err := leases.AcquireAt(ctx, lease.Holder{Owner: owner, APIKeyID: "key-1"}, "openai", []string{"acct-1", "acct-2"}, now)
	fmt.Println(l.Connection, l.Generation, err)
	fmt.Println(leases.FenceAt(ctx, lease.Holder{Owner: owner, APIKeyID: "key-1", Generation: 1}, "acct-1", now))

	slots := rs.Slots()
	ok, held, _, _ := slots.TryAcquire(ctx, "acct-1", 1, rs.Holder("attempt-1"), now)
	fmt.Println(ok, held)
	ok, _, _, _ = slots.TryAcquire(ctx, "acct-1", 1, rs.Holder("attempt-2"), now)
	fmt.Println(ok)
	_ = slots.Release(ctx, "acct-1", rs.Holder("attempt-1"), now)
	// Output:
	// acct-1 1 <nil>
	// <nil>
	// true 1
	// false
}
