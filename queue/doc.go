// Package queue decides, before a request goes out to an upstream, whether it
// may start now, must wait for a slot, or is refused, and it never lets one
// key (typically "provider:connection") be flooded.
//
// A user starts from four calls:
//
//	q := queue.New(queue.Config{MaxConcurrency: 4, MaxQueueDepth: 20})
//	if q.CheckAt(key, now) == queue.Refuse { ... }  // before dispatch: skip a full key
//	release, err := q.Acquire(ctx, key)              // wait for a slot; release when done
//	q.LearnAt(key, resp.StatusCode, resp.Header, now) // adapt to the upstream's rate limits
//
// # The model
//
// A [Queue] keeps one gate per key. A gate counts the requests running on the
// key and holds a FIFO list of waiters. The limits in [Config] bound, for
// every key, how many requests run at once (MaxConcurrency), how often they
// start (RequestsPerMinute, MinSpacing), how many may wait (MaxQueueDepth,
// refused at once with [ErrQueueFull] before any waiting), how long a
// request may wait for its slot (MaxQueueWait, then [ErrQueueTimeout]) and
// how long it may run once started (ExecutionTimeout, then
// [ErrExecutionTimeout]). Config.Overrides gives a key limits of its own.
//
// [Queue.AcquireMany] is the hierarchical semaphore: it takes slots on
// several keys at once (for example a global, a provider and a connection
// limit), all or nothing, each key with the cap the call gives, and can fail
// open: a full queue or a timeout then lets the request proceed without a
// slot and says so in [Grant.Bypassed].
//
// [Queue.LearnAt] adapts a key to the rate-limit headers of an upstream
// answer (x-ratelimit-limit, -remaining, -reset and their Anthropic forms);
// a 429 gives the key a fresh limiter. [Queue.BlockAt] stops starts on a key
// until a given time.
//
// # The zero value
//
// The zero [Config] means the defaults, each documented beside its field: no
// rate or concurrency limit, an unbounded queue, a 15 s wait budget and a
// 600 s execution budget; [Config.Normalize] shows the effective values.
// [FromEnv] reads the seed's environment variables, only when asked. The
// zero [Queue] is usable and applies the default limits to every key; use
// [New] to configure it.
//
// # Which calls to use
//
// [Queue.Acquire] blocks until the request may start and returns a release
// function that frees the slot; [Queue.Do] also runs a function under the
// execution budget, and [Queue.ExecutionContext] gives that budget to a
// caller that runs the request itself. [Queue.TryAcquireAt] takes a slot
// only if it is free at once. [Queue.CheckAt] and [Queue.StatusAt] answer
// without blocking, for eligibility checks before dispatch, and
// [Queue.FullAt] tells whether a semaphore key is at a given cap or
// blocked. [Queue.SnapshotAt] lists every key kept, [Queue.ResetAt] and
// [Queue.ResetAllAt] reject a key's waiters, and [Config.OnChange] receives
// an [Event], with the key's state after the change, for every refusal,
// timeout, fail-open, learned limit, block, reset and removal.
//
// # Error codes
//
// Every refusal, timeout and reset is an [*Error] with the contract's code
// and HTTP status. The two ways in have their own codes: the request queue
// (Acquire, Do) refuses with RATE_LIMIT_QUEUE_FULL and times out with
// RATE_LIMIT_QUEUE_TIMEOUT; the hierarchical semaphore (AcquireMany) refuses
// with SEMAPHORE_QUEUE_FULL and times out with SEMAPHORE_TIMEOUT. All four
// answer HTTP 429. [ErrQueueFull] and [ErrQueueTimeout] match both families
// under errors.Is; [ErrSemaphoreQueueFull] and [ErrSemaphoreTimeout] match
// only the semaphore's. A run past its budget is RATE_LIMIT_EXECUTION_TIMEOUT
// (HTTP 504), a waiter rejected by a reset is SEMAPHORE_RESET (HTTP 503),
// and a new key refused because MaxKeys busy keys are kept is
// RATE_LIMIT_QUEUE_FULL (HTTP 429) with [Error.Keys] set.
//
// # Time, concurrency and cost
//
// Every method whose answer depends on the time takes it (its ...At form);
// the blocking calls (Acquire, AcquireMany, Do) wait on the wall clock.
// Time going backwards is treated as no time passing. The queue starts no
// goroutines and leaves no timer running: a waiting caller waits in its own
// goroutine, and expired state (blocks, reservoirs, idle keys) is refreshed
// or dropped when it is next touched. Idle keys are dropped after
// Config.IdleTTL, and the number of keys kept never exceeds Config.MaxKeys:
// a new key at the cap makes room by dropping the least recently used idle
// key, and is refused with RATE_LIMIT_QUEUE_FULL ([ErrQueueFull], HTTP 429,
// with [Error.Keys] set) when every key kept has requests running, waiting
// or blocked. Taking in a new key costs O(1) amortised
// (O(log n) with blocked keys) however many keys are kept.
//
// A Queue is safe for concurrent use. [Queue.CheckAt], [Queue.StatusAt] and
// [Queue.FullAt] take one read lock and allocate nothing, and neither does
// an Acquire that is refused; one that starts at once allocates only its
// release function, 24 bytes (provided Config.Overrides does not
// allocate), and an AcquireMany grant on known keys that need not wait
// nothing.
package queue
