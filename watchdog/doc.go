// Package watchdog guards one streaming (SSE) attempt against an upstream
// that is alive but useless: it keeps the connection open with heartbeats
// yet produces almost no text, stops sending anything at all, or simply
// takes too long.
//
// A user starts from three calls:
//
//	body := watchdog.WrapAt(resp.Body, cfg, watchdog.Options{Now: clock, Cancel: cancel}, start)
//	n, err := body.Read(p)  // the upstream bytes, or the *Error of an abort
//	body.Committed()        // false: nothing reached the reader, the request may go elsewhere
//
// and, to judge a stream without wrapping it, [NewObserver] with
// [Observer.ObserveAt] per chunk and [Observer.CheckAt] when nothing comes.
//
// # The model
//
// An [Observer] is fed the raw upstream bytes. It splits them into SSE
// events (blank lines, "\n" or "\r\n" line ends, an incomplete tail kept
// for the next chunk), joins each event's data lines and counts the UTF-8
// bytes of useful text: Chat Completions deltas (choices[].delta.content
// and .text), Responses API output_text deltas and Anthropic text_delta
// events. Usage-only events, empty deltas, "[DONE]", comments and
// heartbeats (events named or typed "ping" or "heartbeat") count nothing.
// Tool calls, function calls and reasoning or thinking events start a
// protected phase in which the stream is not judged; the first event with
// useful text ends it.
//
// Four guards, each configured in [Config], can abort the attempt with an
// [*Error] carrying the contract's code and HTTP status 504:
//
//   - the throughput rule (STREAM_THROUGHPUT_TOO_LOW): after a warm-up and
//     one full sliding window, the useful rate over the window is below the
//     minimum; judged only when a chunk arrives, never in a protected phase,
//     and not while the window holds too few bytes to measure;
//   - the idle timeout (STREAM_IDLE_TIMEOUT): no chunk at all for a while;
//   - the attempt deadline (STREAM_ATTEMPT_DEADLINE): an absolute bound on
//     the attempt, whatever it produces;
//   - the readiness timeout (STREAM_READINESS_TIMEOUT): no event other than
//     a heartbeat within a while of the start. Bytes that never complete
//     an event do not count, so an upstream that sends an endless line is
//     caught too.
//
// A [Body] ([WrapAt]) puts an Observer around an upstream body. It hands
// the reader exactly the upstream bytes and reports whether any were handed
// over ([Body.Committed]): before that, a router may retry the request
// elsewhere; after it, it must not replay. Its Finalize hook runs exactly
// once on every path.
//
// # The zero value
//
// The zero [Config] means the defaults, each documented beside its field:
// the readiness timeout is on (120 s) and events are bounded at 1 MiB; the
// throughput rule is off, and the idle timeout and the attempt deadline are
// off unless set. Warmup and ReadinessTimeout are pointers, because 0 is a
// real value for them: nil means the default, a set 0 means no warm-up or
// no readiness timeout. [Config.Normalize] shows the effective values,
// [Config.Validate] checks an operator's update, and [FromEnv] reads the
// seed's environment variables, only when asked. The zero [Observer]
// behaves like NewObserver(Config{}).
//
// # Which calls to use
//
// [Wrap] is shorthand for WrapAt at the clock's current time. [Body.Stats]
// and [Observer.StatsAt] give a snapshot (useful bytes, phase, window
// rate); [Observer.DueAt] says when the next time guard falls due.
// [FindErrorEvent] and [Observer.ErrorEvent] expose an error event found
// inside a stream whose status was 200, so it can be classified like an
// HTTP error; [ErrorEvent.SSE] gives the event back in wire form, name
// included.
//
// # Time, concurrency and cost
//
// Time is an input. An Observer decides only when called, with an explicit
// time (the XAt methods; X is shorthand for XAt(time.Now())); time going
// backwards is treated as no time passing. A Body reads every time from one
// clock, Options.Now (time.Now when nil), which should be the caller's own:
// the start given to [WrapAt], each chunk's timestamp and every guard check
// come from it, so a clock shifted from the wall clock changes nothing.
//
// The package starts no goroutines. A Body with a time guard pending uses
// one [time.AfterFunc] timer, only to wake a blocked Read: its delay is
// computed on the injected clock ([Observer.DueAt] minus now), the guards
// are re-checked on that clock when it fires, and it is re-armed if the
// clock says it is not yet due (a fake clock that does not move with real
// time is therefore re-checked at each wake-up until it reaches the due
// time; under testing/synctest, time.Now and the timers move together). It
// is stopped when the attempt ends.
//
// An Observer is safe for concurrent use and holds at most
// Config.MaxEventBytes of buffered input; observing a chunk allocates
// nothing once its buffers have grown. A Body's Read must not be called
// concurrently with itself; its other methods are safe for concurrent use.
package watchdog
