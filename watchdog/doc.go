// Package watchdog guards one streaming (SSE) attempt against an upstream
// that is alive but useless: it keeps the connection open with heartbeats
// yet produces almost no text, stops sending anything at all, or simply
// takes too long.
//
// An [Observer] is fed the raw upstream bytes. It splits them into SSE
// events (blank lines, "\n" or "\r\n" line ends, an incomplete tail kept
// for the next chunk), joins each event's data lines and counts the UTF-8
// bytes of useful text: Chat Completions deltas (choices[].delta.content
// and .text), Responses API output_text deltas and Anthropic text_delta
// events. Usage-only events, empty deltas, "[DONE]", comments and pings
// count nothing. Tool calls, function calls and reasoning or thinking
// events start a protected phase in which the stream is not judged; the
// first event with useful text ends it.
//
// Three guards, each configured in [Config], can abort the attempt with an
// [*Error] carrying a stable code:
//
//   - the throughput rule (STREAM_THROUGHPUT_TOO_LOW): after a warm-up and
//     one full sliding window, the useful rate over the window is below the
//     minimum; judged only when a chunk arrives, never in a protected phase,
//     and not while the window holds too few bytes to measure;
//   - the idle timeout (STREAM_IDLE_TIMEOUT): no chunk at all for a while;
//   - the attempt deadline (STREAM_ATTEMPT_DEADLINE): an absolute bound on
//     the attempt, whatever it produces.
//
// The throughput rule is off by default and the two time guards are off
// unless set; [FromEnv] reads them from the environment.
//
// [Wrap] puts an Observer around an upstream body. The resulting [Body]
// hands the reader exactly the upstream bytes and reports whether any were
// handed over ([Body.Committed]): before that, a router may retry the
// request elsewhere; after it, it must not replay. Its Finalize hook runs
// exactly once on every path.
//
// The package starts no goroutines. An Observer decides only when called,
// with an explicit time. A Body that has a time guard uses one
// [time.AfterFunc] timer so the guard can fire while Read blocks, and stops
// it when the attempt ends.
//
// [FindErrorEvent] and [Observer.ErrorEvent] expose an error event found
// inside a stream whose status was 200, so it can be classified like an
// HTTP error; [ErrorEvent.SSE] gives the event back in wire form, name
// included.
package watchdog
