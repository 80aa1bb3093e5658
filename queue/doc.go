// Package queue decides, before a request goes out to an upstream, whether it
// may start now, must wait for a slot, or is refused, and it never lets one
// key (typically "provider:connection") be flooded.
//
// A [Queue] keeps one gate per key. A gate counts the requests running on the
// key and holds a FIFO list of waiters. Each key's [Settings] bound how many
// requests run at once (MaxConcurrency), how often they start
// (RequestsPerMinute, MinSpacing), how many may wait (MaxQueueDepth, refused
// at once with [ErrQueueFull] before any waiting), how long a request may
// wait for its slot (MaxQueueWait, then [ErrQueueTimeout]) and how long it may
// run once started (ExecutionTimeout, then [ErrExecutionTimeout]).
//
// # Calling it
//
// [Queue.Acquire] blocks until the request may start and returns a release
// function that frees the slot; [Queue.Do] also runs a function under the
// execution budget. [Queue.Check] and [Queue.Status] answer without blocking
// and without allocating, for eligibility checks before dispatch.
// [Queue.AcquireMany] takes slots on several keys at once (for example a
// global, a provider and a connection limit), all or nothing, and can fail
// open: a full queue or a timeout then lets the request proceed without a
// slot and says so in [Grant.Bypassed]. [Queue.FullAt] tells whether such a
// key is at a given cap or blocked.
//
// [Queue.Learn] adapts a key to the rate-limit headers of an upstream answer
// (x-ratelimit-limit, -remaining, -reset and their Anthropic forms); a 429
// gives the key a fresh limiter.
//
// # Time, memory and concurrency
//
// The queue starts no goroutines and leaves no timer running: a waiting
// caller waits in its own goroutine, and expired state (blocks, reservoirs,
// idle keys) is refreshed or dropped when it is next touched. Methods whose
// answer depends on the time have an At form taking the time explicitly;
// time going backwards is treated as no time passing. Idle keys are dropped
// after Config.IdleTTL and the number of idle keys kept is capped by
// Config.MaxKeys.
//
// A Queue is safe for concurrent use. The zero Queue is usable and applies
// the default settings to every key; use [New] to configure it.
package queue
