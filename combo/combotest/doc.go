// Package combotest provides fake LLM upstreams for tests: scripted answers
// per call and per credential, served either in process through an
// [http.RoundTripper] or over loopback through an [httptest.Server].
//
// A script is a list of [Reply] values. Each call takes the next reply of
// the script registered for its credential (the bearer token of the
// Authorization header, or the x-api-key header), falling back to the
// default script; the last reply of a script repeats once the script is used
// up. A reply can be a plain answer (status, headers, body), a delay, a
// connection reset, a hang that lasts until the request is cancelled, or a
// server-sent-event stream with a chosen pace, heartbeats, tool-call and
// reasoning events, and error events inside a 200 stream.
//
// # Chaos mode
//
// For soak tests, [Upstream.Chaos] adds seeded random faults on top of the
// script: a share of 503 answers, of 429 answers with Retry-After, of
// dropped connections and of stalled answers (started, then silent until
// the client cancels), and a random added latency. The same seed and the
// same sequence of calls give the same faults; [Upstream.Faults] counts
// them and [Call.Fault] tells which call got which; [Chaos.Draws] is the
// sequence a seed gives, to check a run against ([DrawsOf]).
//
// # Memory
//
// An upstream keeps only the most recent calls for [Upstream.Calls]
// ([DefaultLogSize], or [Upstream.SetLogSize]) and counts all of them, so
// one left running does not grow without bound; the per-credential counts
// grow with the number of distinct credentials only.
//
// # Goroutines and time
//
// The in-process transport starts no goroutine: a streamed body produces its
// events on Read, waiting out the pace there, so it also runs inside
// testing/synctest bubbles where the pace and any latency pass instantly.
// The loopback server runs handlers on the goroutines of net/http;
// [Upstream.Close] ends every hanging, stalled or streaming handler and
// waits for them.
package combotest
