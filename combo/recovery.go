package combo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// StreamRecovery is the opt-in recovery of streamed answers. The zero value
// turns both kinds off, as the spec's defaults do.
//
// Early recovery acts before a stream's commit, while the client has
// nothing yet: a stream attempt that fails there (a watchdog guard such as
// the readiness or idle timeout, an empty stream, a stream held past its
// bound without useful output, or a read error) is reopened once on the
// same target, at once, before the router moves on. The failed stream is
// in the trail as a failed attempt with Code "stream_reopen" and is
// reported to no layer; the reopened attempt counts against
// Settings.MaxAttempts and is classified as usual when it fails too. A
// stream that carries an error event, one cut by the per-target timeout
// and one cut by the request's deadline are not reopened.
//
// Mid-stream continuation acts after the commit, for plain-text
// OpenAI-style chat completion streams: every event a data: line holding
// a JSON chat.completion.chunk of one choice (index 0). When such a stream
// breaks off (a read error, a watchdog guard, an end before its declared
// length or an end with neither a finish_reason nor data: [DONE]) with text
// sent, no tool call seen and no reasoning block in flight, the router asks
// the next eligible target (the combo's targets less those that served the
// answer, screened and ordered as usual, with fallbacks, under the
// request's deadline) to continue it through Request.Continue, with the
// text the client already has as the assistant's partial answer (see
// [ContinuationBody]), and streams on only what the new answer adds. The
// client reads one stream: the original's events, then the continuation's
// text re-framed as chunks with the original's id, created and model (its
// role and reasoning deltas dropped), then one data: [DONE]. A continuation
// that repeats the text already sent is cut to what follows the repeat;
// one whose whole answer is a prefix of it adds nothing. A continuation
// that breaks off in turn is continued again while continuations are left
// (MaxContinuations). The attempts of a continuation are appended to the
// request's Result.Attempts, by the Read that starts it (the successful one
// with Code "stream_continuation"), and seen by Config.OnAttempt and the
// layers like any other.
//
// Anything else keeps the rule without recovery: a tool call or a
// reasoning block in flight, another framing, no Request.Continue, no
// continuation left, no target left or every one failing, a continuation
// that is not a plain chat stream, the request's deadline, the caller's
// end. The client then gets the bytes the upstream sent, then the error. A
// stream that breaks off after its finish_reason is whole: it ends with
// the data: [DONE] it lacks instead of an error.
//
// While continuation is on, the body hands on whole events only (the
// upstream's bytes, unchanged, up to the last blank line), so a cut inside
// an event, a JSON string or a UTF-8 sequence leaves the client with
// complete events; it holds the answer's text, and one incomplete event of
// at most the watchdog's event bound (past which it passes bytes on as
// they come, and does not continue).
type StreamRecovery struct {
	// Early reopens a stream attempt that fails before its commit once on
	// the same target.
	Early bool
	// MidStream continues a committed stream that breaks off on the next
	// eligible target; it needs Request.Continue.
	MidStream bool
	// MaxContinuations bounds the continuations of one answer. 0 (or a
	// negative value) means 1; clamped to 1..5.
	MaxContinuations int
}

// Defaults and range of StreamRecovery.MaxContinuations.
const (
	defaultMaxContinuations = 1
	maxContinuationsLimit   = 5
)

// Normalize returns r with MaxContinuations set to its default or clamped
// into its range.
func (r StreamRecovery) Normalize() StreamRecovery {
	r.MaxContinuations = r.maxContinuations()
	return r
}

func (r StreamRecovery) maxContinuations() int {
	if r.MaxContinuations <= 0 {
		return defaultMaxContinuations
	}
	return min(r.MaxContinuations, maxContinuationsLimit)
}

// ContinueFunc sends the continuation of a committed stream that broke off
// to t: the original request with partial, the text the client already
// has, as the assistant's partial answer (see [ContinuationBody]), as a
// streamed request. Like a [SendFunc] it must honour ctx.
type ContinueFunc func(ctx context.Context, t *Target, partial string) (*http.Response, error)

// ContinuationBody returns the body of the request that asks for the
// continuation of partial: body, an OpenAI-style chat completion request
// (a JSON object with a "messages" array), with one message appended,
// {"role":"assistant","content":partial}. Every other field is kept as it
// is. It fails when body is not such a request.
func ContinuationBody(body []byte, partial string) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil || fields == nil {
		return nil, errors.New("combo: continuation: the request body is not a JSON object")
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(fields["messages"], &msgs); err != nil || msgs == nil {
		return nil, errors.New("combo: continuation: the request has no messages array")
	}
	m, err := json.Marshal(struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}{"assistant", partial})
	if err != nil {
		return nil, err
	}
	if fields["messages"], err = json.Marshal(append(msgs, m)); err != nil {
		return nil, err
	}
	return json.Marshal(fields)
}

// codeStreamReopen is the Attempt.Code of a stream attempt that early
// recovery reopens on the same target.
const codeStreamReopen = "stream_reopen"

// reopenStream decides whether a stream attempt that failed before its
// commit with err is reopened on the same target (early recovery): when it
// is, the attempt is ended without a report to any layer and the returned
// failure tells tryTarget to send again at once; otherwise it returns nil
// and the failure is classified as usual. status is the failure's status.
func (r *Router) reopenStream(st *reqState, a *run, status int, err error) *failure {
	if st.reopen <= 0 || st.budget <= 0 || a.timedOut.Load() || st.context().Err() != nil ||
		!r.now().Before(st.deadline) {
		return nil
	}
	st.reopen--
	f := &failure{retrySame: true, reopen: true}
	f.Status, f.Reason, f.Err = status, codeStreamReopen, err
	return f
}

// reopened ends an attempt that early recovery reopens: nothing is
// reported, the trail records it.
func (r *Router) reopened(st *reqState, a *run, f *failure) (*http.Response, *failure, error) {
	a.stop()
	a.ts.inFlight.Add(-1)
	a.h.abandon()
	r.record(st, a.t, a.timing(&Attempt{Target: *a.t, Outcome: OutcomeFailed, Status: f.Status, Code: codeStreamReopen,
		Err: f.Err, Start: a.start, Duration: r.now().Sub(a.start)}))
	return nil, f, nil
}

// midStream reports whether a committed stream of this request may be
// continued after it breaks off.
func (st *reqState) midStream() bool {
	return st.set.StreamRecovery.MidStream && st.req.Continue != nil
}

// resumable turns fb, the body of a committed stream whose held prefix is
// prefix and whose rest is body, into a body that continues the answer on
// the next target when the stream breaks off (see [StreamRecovery]).
func (r *Router) resumable(fb *finalBody, st *reqState, a *run, prefix []byte, body io.ReadCloser, declared int64) {
	rb := &resumeBody{
		r: r, ctx: st.context(), req: *st.req, res: st.res, fin: &fb.fin, a: a,
		cur: body, curC: body, left: -1,
		conts: st.set.StreamRecovery.maxContinuations(),
		bound: eventBound(r.cfg.Watchdog),
		used:  []targetKey{keyOf(a.t)},
	}
	rb.req.Continue = nil // continuations are not continued from within
	rb.cont = st.req.Continue
	if declared > 0 {
		rb.left = declared - int64(len(prefix))
	}
	rb.ingest(prefix)
	fb.buf.Reset(nil)
	fb.up, fb.c, fb.left = rb, rb, -1
}

// resumeBody is the body of a committed stream under mid-stream
// continuation: it hands on whole events only, tracks the text they carry,
// and when the stream breaks off, asks the next target for the rest.
type resumeBody struct {
	r    *Router
	ctx  context.Context
	req  Request // the request, for the continuations' dispatch
	cont ContinueFunc
	res  *Result    // the request's result: continuations add to its trail
	fin  *finalizer // the original attempt's
	a    *run       // the original attempt

	cur io.Reader // the stream read now: the original or a continuation
	// mu guards curC and closed: Close may come from another goroutine.
	mu     sync.Mutex
	curC   io.Closer
	closed bool

	left  int64 // bytes the original still owes its Content-Length; -1 when unknown
	conts int   // continuations left
	bound int   // longest incomplete event held
	used  []targetKey

	raw    []byte // bytes read but not yet split into whole events
	out    []byte // whole events ready for the reader
	off    int    // read offset in out
	final  error  // returned once out is drained
	buf    []byte // read buffer
	passed bool   // recovery given up: bytes pass as they come

	// What the client has, from the events handed on.
	trk streamTrack
	// The continuation in progress.
	cmode    bool   // serving a continuation
	partial  string // the text the client had when it started
	matching bool   // the continuation's text so far repeats partial
	mpos     int    // how much of partial it repeats
	contDone bool   // the continuation's [DONE] was handed on, or it failed

	ci      chunkInfo // the event read now
	scratch []byte    // its decoded text
	data    []byte    // the joined data of an event of several data lines
}

// streamTrack is what the events handed on so far tell.
type streamTrack struct {
	text     strings.Builder // the text of the chat deltas
	id       string          // the framing of the first chunk
	model    string
	created  json.RawMessage
	framed   bool // id, model and created were taken
	plain    bool // every event so far is a chat chunk of one choice
	seen     bool // an event was seen
	tool     bool // a tool call was seen
	thinking bool // a reasoning block is in flight
	finished bool // a finish_reason or [DONE] was seen
	done     bool // [DONE] was seen
}

func (b *resumeBody) Read(p []byte) (int, error) {
	for {
		if b.off < len(b.out) {
			n := copy(p, b.out[b.off:])
			b.off += n
			if b.off == len(b.out) {
				b.out, b.off = b.out[:0], 0
			}
			return n, nil
		}
		if b.final != nil {
			return 0, b.final
		}
		if b.buf == nil {
			b.buf = make([]byte, 32<<10)
		}
		n, err := b.cur.Read(b.buf)
		if n > 0 {
			if !b.cmode && b.left >= 0 {
				b.left -= int64(n)
			}
			b.ingest(b.buf[:n])
		}
		if err == nil || b.final != nil {
			continue
		}
		b.ended(err)
	}
}

// ingest splits chunk into whole events and handles each; the incomplete
// tail stays in raw (up to the event bound, past which recovery is given
// up and bytes pass as they come).
func (b *resumeBody) ingest(chunk []byte) {
	if b.passed {
		b.out = append(b.out, chunk...)
		return
	}
	b.raw = append(b.raw, chunk...)
	at := 0
	for at < len(b.raw) {
		rest := b.raw[at:]
		end, next := eventEnd(rest)
		if end < 0 {
			break
		}
		b.event(rest[:next], rest[:end])
		at += next
	}
	if b.raw == nil {
		return // the event ended the stream (see contFailed)
	}
	b.raw = b.raw[:copy(b.raw, b.raw[at:])]
	if len(b.raw) > b.bound {
		if b.cmode {
			b.contFailed(errors.New("combo: continuation: an event longer than the event bound"))
			return
		}
		b.passUp()
	}
}

// passUp gives recovery up: the held tail and everything after pass on as
// they come.
func (b *resumeBody) passUp() {
	b.passed = true
	b.out = append(b.out, b.raw...)
	b.raw = nil
}

// eventEnd finds the first blank line of s: end is where the event's lines
// end and next where the next event starts; end is -1 when s holds no
// whole event.
func eventEnd(s []byte) (end, next int) {
	for i := 0; i < len(s); {
		j := bytes.IndexByte(s[i:], '\n')
		if j < 0 {
			return -1, 0
		}
		j += i
		// The line s[i:j] (without its \r) is blank: the event ends here.
		if j == i || (j == i+1 && s[i] == '\r') {
			return i, j + 1
		}
		i = j + 1
	}
	return -1, 0
}

// event handles one whole event: raw is its wire form with its blank line,
// lines its lines.
func (b *resumeBody) event(raw, lines []byte) {
	name, data, hasData := parseEvent(lines, b.data[:0])
	if hasData && len(data) > 0 && cap(data) > cap(b.data) {
		b.data = data[:0] // keep the grown buffer
	}
	if b.cmode {
		b.contEvent(name, data, hasData)
		return
	}
	b.out = append(b.out, raw...)
	b.observe(name, data, hasData)
}

// parseEvent returns an event's name and joined data. The data of a single
// data line points into lines; several are joined in buf.
func parseEvent(lines, buf []byte) (name, data []byte, hasData bool) {
	joined := false
	for len(lines) > 0 {
		l := lines
		if i := bytes.IndexByte(lines, '\n'); i >= 0 {
			l, lines = lines[:i], lines[i+1:]
		} else {
			lines = nil
		}
		l = bytes.TrimSuffix(l, []byte{'\r'})
		if len(l) == 0 || l[0] == ':' {
			continue
		}
		field, value := l, []byte(nil)
		if i := bytes.IndexByte(l, ':'); i >= 0 {
			field, value = l[:i], l[i+1:]
			value = bytes.TrimPrefix(value, []byte{' '})
		}
		switch string(field) {
		case "data":
			switch {
			case !hasData:
				data, hasData = value, true
			case !joined:
				buf = append(append(append(buf, data...), '\n'), value...)
				data, joined = buf, true
			default:
				buf = append(append(buf, '\n'), value...)
				data = buf
			}
		case "event":
			name = value
		}
	}
	return name, data, hasData
}

// chunk reads the data of an event named name into b.ci and reports
// whether it is a chat chunk of one choice (anything else is another
// framing).
func (b *resumeBody) chunk(name, data []byte) bool {
	if len(name) > 0 && string(name) != "message" {
		return false
	}
	b.scratch = scanChunk(data, b.scratch, &b.ci)
	return b.ci.plain
}

func isDone(data []byte) bool { return string(bytes.TrimSpace(data)) == "[DONE]" }

// observe learns from one event of the original stream, as handed on.
func (b *resumeBody) observe(name, data []byte, hasData bool) {
	t := &b.trk
	if !t.seen {
		t.seen, t.plain = true, true
	}
	if !hasData {
		if len(name) > 0 {
			t.plain = false
		}
		return // a comment or heartbeat
	}
	if isDone(data) {
		t.finished, t.done = true, true
		return
	}
	if !b.chunk(name, data) {
		t.plain = false
		return
	}
	c := &b.ci
	if !t.framed && c.id != nil {
		t.framed, t.id, t.model, t.created = true, jsString(c.id), jsString(c.model), bytes.Clone(c.created)
	}
	if c.tool {
		t.tool = true
	}
	if c.think {
		t.thinking = true
	}
	if len(c.text) > 0 {
		t.text.Write(c.text)
		t.thinking = false
	}
	if c.finish != nil {
		t.finished = true
	}
}

// ended handles the end of the stream read now, with err (io.EOF for its
// end): a normal end, a continuation, or the error for the reader.
func (b *resumeBody) ended(err error) {
	eof := err == io.EOF //nolint:errorlint // io.Reader's own value
	if b.cmode && (b.contDone || (eof && b.trk.finished)) {
		// The continuation ended its answer: close it with one [DONE].
		if !b.contDone {
			b.doneOut()
		}
		b.closeCur()
		b.finish(io.EOF)
		return
	}
	if !b.cmode && eof && b.left > 0 {
		err, eof = io.ErrUnexpectedEOF, false
	}
	switch {
	case eof && b.trk.finished:
		b.finish(io.EOF)
	case b.trk.finished && b.trk.plain && !b.passed && !b.a.deadlineHit():
		// Broken off after its finish_reason: the answer is whole; its
		// unfinished tail gives way to the [DONE] it lacks.
		b.raw = nil
		if !b.trk.done {
			b.out = append(b.out, "data: [DONE]\n\n"...)
		}
		b.finish(io.EOF)
	case b.a.deadlineHit():
		b.finish(ErrRequestTimeout)
	case b.ctx.Err() != nil:
		b.finish(err)
	case b.continueAnswer():
		// reading goes on from the continuation
	case eof && !b.cmode:
		b.finish(io.EOF) // not continued: the end is handed on as it came
	case eof:
		b.finish(io.ErrUnexpectedEOF)
	default:
		b.finish(err)
	}
}

// finish ends the body with err once what is ready has been read; the held
// tail of the original stream is handed on as it is.
func (b *resumeBody) finish(err error) {
	if !b.cmode && !b.passed {
		b.out = append(b.out, b.raw...)
	}
	b.raw = nil
	b.final = err
}

// eligible reports whether the answer may be continued now.
func (b *resumeBody) eligible() bool {
	t := &b.trk
	return !b.passed && b.conts > 0 && t.plain && !t.tool && !t.thinking && !t.finished && t.text.Len() > 0
}

// continueAnswer asks the next eligible target for the rest of the answer
// and reports whether reading goes on from it.
func (b *resumeBody) continueAnswer() bool {
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed || !b.eligible() {
		return false
	}
	b.conts--
	b.closeCur()
	b.fin.finish()
	partial := b.trk.text.String()
	req := b.req
	req.Combo = b.remaining()
	cont := b.cont
	res, err := b.r.dispatch(b.ctx, req, func(ctx context.Context, t *Target) (*http.Response, error) {
		return cont(ctx, t, partial)
	})
	if res != nil {
		for i := range res.Attempts {
			if res.Attempts[i].Outcome == OutcomeSucceeded {
				res.Attempts[i].Code = codeStreamContinuation
			}
		}
		b.res.Attempts = append(b.res.Attempts, res.Attempts...)
	}
	if err != nil {
		return false
	}
	if !isEventStream(res.Response) {
		res.Response.Body.Close()
		return false
	}
	b.mu.Lock()
	closed = b.closed
	if !closed {
		b.cur, b.curC = res.Response.Body, res.Response.Body
	}
	b.mu.Unlock()
	if closed {
		res.Response.Body.Close()
		return false
	}
	b.raw = nil // the original's unfinished event never reaches the client
	b.used = append(b.used, keyOf(&res.Target))
	b.cmode, b.contDone = true, false
	b.partial, b.matching, b.mpos = partial, partial != "", 0
	return true
}

// codeStreamContinuation is the Attempt.Code of the successful attempt of
// a mid-stream continuation.
const codeStreamContinuation = "stream_continuation"

// remaining is the request's combo without the targets that served this
// answer already.
func (b *resumeBody) remaining() *Combo {
	c := *b.req.Combo
	c.Targets = make([]Target, 0, len(c.Targets))
	for _, t := range b.req.Combo.Targets {
		k, used := keyOf(&t), false
		for _, u := range b.used {
			used = used || u == k
		}
		if !used {
			c.Targets = append(c.Targets, t)
		}
	}
	return &c
}

func (b *resumeBody) closeCur() {
	b.mu.Lock()
	c := b.curC
	b.curC = nil
	b.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

// contEvent handles one whole event of a continuation: the suffix it adds
// goes on, re-framed as the original's.
func (b *resumeBody) contEvent(name, data []byte, hasData bool) {
	if b.contDone || !hasData {
		return
	}
	if isDone(data) {
		b.doneOut()
		return
	}
	if !b.chunk(name, data) {
		b.contFailed(fmt.Errorf("combo: continuation: not a chat completion chunk: %.64q", data))
		return
	}
	c := &b.ci
	if c.tool {
		b.contFailed(errors.New("combo: continuation: the answer calls a tool"))
		return
	}
	piece := b.suffix(string(c.text))
	var finish *string
	if c.finish != nil {
		finish = new(jsString(c.finish))
	}
	if piece == "" && finish == nil && c.usage == nil {
		return
	}
	b.chunkOut(piece, finish, bytes.Clone(c.usage))
	if finish != nil {
		b.trk.finished = true
	}
}

// suffix returns what text t of the continuation adds to the answer.
func (b *resumeBody) suffix(t string) string {
	if t == "" {
		return ""
	}
	if !b.matching {
		return t
	}
	rest := b.partial[b.mpos:]
	switch {
	case strings.HasPrefix(rest, t):
		b.mpos += len(t)
		return ""
	case strings.HasPrefix(t, rest):
		b.matching = false // the answer restarted: what follows the repeat is new
		return t[len(rest):]
	default:
		b.matching = false // the answer continues
		return b.partial[:b.mpos] + t
	}
}

// outChunk is a continuation's chunk as the client receives it.
type outChunk struct {
	ID      string          `json:"id,omitempty"`
	Object  string          `json:"object"`
	Created json.RawMessage `json:"created,omitempty"`
	Model   string          `json:"model,omitempty"`
	Choices []outChoice     `json:"choices"`
	Usage   json.RawMessage `json:"usage,omitempty"`
}

type outChoice struct {
	Index int `json:"index"`
	Delta struct {
		Content *string `json:"content,omitempty"`
	} `json:"delta"`
	FinishReason *string `json:"finish_reason"`
}

// chunkOut hands on one re-framed chunk.
func (b *resumeBody) chunkOut(piece string, finish *string, usage json.RawMessage) {
	t := &b.trk
	c := outChunk{ID: t.id, Object: "chat.completion.chunk", Created: t.created, Model: t.model, Usage: usage,
		Choices: []outChoice{}}
	if piece != "" || finish != nil {
		var ch outChoice
		if piece != "" {
			ch.Delta.Content = &piece
		}
		ch.FinishReason = finish
		c.Choices = append(c.Choices, ch)
	}
	data, err := json.Marshal(c)
	if err != nil {
		b.contFailed(err)
		return
	}
	b.out = append(b.out, "data: "...)
	b.out = append(b.out, data...)
	b.out = append(b.out, "\n\n"...)
	t.text.WriteString(piece)
}

func (b *resumeBody) doneOut() {
	b.out = append(b.out, "data: [DONE]\n\n"...)
	b.contDone, b.trk.finished = true, true
}

// contFailed ends the answer: the continuation is not one that can be
// handed on.
func (b *resumeBody) contFailed(err error) {
	b.contDone = true
	b.closeCur()
	b.raw = nil
	b.final = err
}

// Close closes the stream read now; the caller's finalBody finalizes the
// original attempt, and closing a continuation's body finalizes its own.
func (b *resumeBody) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.closeCur()
	return nil
}
