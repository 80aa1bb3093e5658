package combotest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Call is one request an [Upstream] received.
type Call struct {
	Credential string // bearer token or x-api-key; "" when absent
	Method     string
	Path       string
	Header     http.Header
	Body       []byte
	// N is the number of this call among the calls with the same credential,
	// starting at 1.
	N int
	// Fault is the fault chaos mode injected into this call, and Delay the
	// latency it added; see [Upstream.Chaos].
	Fault Fault
	Delay time.Duration
}

// Handler computes a reply for a call, as an alternative to a fixed script.
type Handler func(Call) Reply

type script struct {
	replies []Reply
	handler Handler
	next    int
}

// DefaultLogSize is how many of the most recent calls an [Upstream] keeps
// for [Upstream.Calls] unless [Upstream.SetLogSize] says otherwise.
const DefaultLogSize = 1000

// Upstream is a fake LLM provider. Its zero value is not usable; call [New].
// An Upstream is safe for concurrent use.
//
// An Upstream keeps a log of the most recent calls, [DefaultLogSize] by
// default, and counts every call, so one left running for hours (a demo, a
// soak test) holds a bounded amount of memory: the log drops its oldest
// call for each new one once full, while [Upstream.Total],
// [Upstream.Count] and [Upstream.Faults] stay exact.
type Upstream struct {
	mu      sync.Mutex
	scripts map[string]*script // by credential; "" is the default
	calls   []Call             // the log; a ring once full, oldest at head
	head    int                // index of the oldest call when the log is full
	logSize int                // 0 means DefaultLogSize
	total   int
	counts  map[string]int
	chaos   *chaos // nil when chaos mode is off
	faults  Faults
	srv     *httptest.Server

	done      chan struct{} // closed by Close: ends hangs and streams
	closeOnce sync.Once
}

// New returns an upstream that answers every call with [OK]("ok") until a
// script says otherwise. Call Close when done.
func New() *Upstream {
	return &Upstream{
		scripts: make(map[string]*script),
		counts:  make(map[string]int),
		done:    make(chan struct{}),
	}
}

// Script sets the replies for calls carrying credential ("" for calls that
// match no other script). Each call takes the next reply; the last one
// repeats. Script replaces any earlier script or handler for credential.
func (u *Upstream) Script(credential string, replies ...Reply) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.scripts[credential] = &script{replies: append([]Reply(nil), replies...)}
}

// Handle sets a function that computes the reply for calls carrying
// credential. It replaces any earlier script for credential.
func (u *Upstream) Handle(credential string, h Handler) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.scripts[credential] = &script{handler: h}
}

// Calls returns a copy of the most recent calls, oldest first: every call
// received so far while there have been no more than the log size (see
// [Upstream.SetLogSize]), else the last log-size calls.
func (u *Upstream) Calls() []Call {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.orderedCalls()
}

// SetLogSize sets how many of the most recent calls the upstream keeps for
// [Upstream.Calls]; n <= 0 means [DefaultLogSize]. Shrinking the log drops
// its oldest calls at once. The counts of [Upstream.Total],
// [Upstream.Count] and [Upstream.Faults] are not affected.
func (u *Upstream) SetLogSize(n int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.logSize = max(n, 0)
	calls := u.orderedCalls()
	if over := len(calls) - u.logCap(); over > 0 {
		calls = append([]Call(nil), calls[over:]...)
	}
	u.calls, u.head = calls, 0
}

// orderedCalls returns a copy of the log, oldest first. Requires u.mu.
func (u *Upstream) orderedCalls() []Call {
	if len(u.calls) == 0 {
		return nil
	}
	out := make([]Call, 0, len(u.calls))
	out = append(out, u.calls[u.head:]...)
	return append(out, u.calls[:u.head]...)
}

func (u *Upstream) logCap() int {
	if u.logSize <= 0 {
		return DefaultLogSize
	}
	return u.logSize
}

// logCall adds c to the log, dropping the oldest call when the log is full.
// Requires u.mu.
func (u *Upstream) logCall(c Call) {
	if len(u.calls) < u.logCap() {
		u.calls = append(u.calls, c) // head is 0 until the log is full
		return
	}
	u.calls[u.head] = c
	u.head = (u.head + 1) % len(u.calls)
}

// Count returns how many calls carried credential.
func (u *Upstream) Count(credential string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.counts[credential]
}

// Total returns how many calls were received, including those the log has
// dropped.
func (u *Upstream) Total() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.total
}

// URL starts a loopback HTTP server for the upstream on first use and
// returns its base URL.
func (u *Upstream) URL() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.srv == nil {
		u.srv = httptest.NewServer(http.HandlerFunc(u.serveHTTP))
	}
	return u.srv.URL
}

// Close ends every hanging or streaming answer, shuts the loopback server
// down if one was started, and waits for its handlers to return.
func (u *Upstream) Close() {
	u.closeOnce.Do(func() { close(u.done) })
	u.mu.Lock()
	srv := u.srv
	u.mu.Unlock()
	if srv != nil {
		srv.CloseClientConnections()
		srv.Close()
	}
}

// Transport returns a RoundTripper that answers in process, without a
// network and without goroutines.
func (u *Upstream) Transport() http.RoundTripper { return transport{u} }

// Credential returns the credential a request carries: the bearer token of
// its Authorization header, else its x-api-key header.
func Credential(h http.Header) string {
	if auth := h.Get("Authorization"); auth != "" {
		if token, ok := strings.CutPrefix(auth, "Bearer "); ok {
			return strings.TrimSpace(token)
		}
		return strings.TrimSpace(auth)
	}
	return h.Get("X-Api-Key")
}

// record registers a call, picks its reply and applies chaos mode to it.
func (u *Upstream) record(r *http.Request) (Reply, Fault, error) {
	var body []byte
	if r.Body != nil {
		var err error
		body, err = io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return Reply{}, FaultNone, err
		}
	}
	c := Call{
		Credential: Credential(r.Header),
		Method:     r.Method,
		Path:       r.URL.Path,
		Header:     r.Header.Clone(),
		Body:       body,
	}
	u.mu.Lock()
	u.total++
	u.counts[c.Credential]++
	c.N = u.counts[c.Credential]
	var retryAfter time.Duration
	if u.chaos != nil {
		c.Fault, c.Delay = u.chaos.draw()
		retryAfter = u.chaos.cfg.RetryAfter
		u.faults.count(c.Fault, c.Delay)
	}
	u.logCall(c)
	s, ok := u.scripts[c.Credential]
	if !ok {
		s = u.scripts[""]
	}
	var reply Reply
	var h Handler
	switch {
	case s == nil:
		reply = OK("ok")
	case s.handler != nil:
		h = s.handler
	case len(s.replies) == 0:
		reply = OK("ok")
	default:
		reply = s.replies[min(s.next, len(s.replies)-1)]
		if s.next < len(s.replies) {
			s.next++
		}
	}
	u.mu.Unlock()
	if h != nil {
		reply = h(c) // outside the lock: the handler may inspect the upstream
	}
	return inject(reply, c.Fault, c.Delay, retryAfter), c.Fault, nil
}

// wait blocks for d, or until ctx ends or the upstream closes.
func (u *Upstream) wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-u.done:
		return errClosed
	}
}

// block waits until ctx ends or the upstream closes.
func (u *Upstream) block(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-u.done:
		return errClosed
	}
}

var errClosed = errors.New("combotest: upstream closed")

// ErrReset is the error the in-process transport returns for a [Reset]
// reply. It matches syscall.ECONNRESET.
var ErrReset = &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}

type transport struct{ u *Upstream }

func (t transport) RoundTrip(r *http.Request) (*http.Response, error) {
	u := t.u
	reply, fault, err := u.record(r)
	if err != nil {
		return nil, err
	}
	ctx := r.Context()
	if err := u.wait(ctx, reply.Latency); err != nil {
		return nil, err
	}
	switch {
	case reply.Reset:
		return nil, ErrReset
	case reply.Hang:
		return nil, u.block(ctx)
	}
	resp := &http.Response{
		Status:     http.StatusText(statusOf(reply)),
		StatusCode: statusOf(reply),
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     make(http.Header),
		Request:    r,
	}
	for k, v := range reply.Header {
		resp.Header[k] = append([]string(nil), v...)
	}
	if reply.Stream != nil {
		resp.Header.Set("Content-Type", "text/event-stream")
		resp.ContentLength = -1
		resp.Body = cutBody(reply.Stream, &streamBody{u: u, ctx: ctx, s: reply.Stream, closed: make(chan struct{})})
		return resp, nil
	}
	resp.ContentLength = int64(len(reply.Body))
	if fault == FaultStall {
		s := &Stream{HangAfter: true}
		if part := stallBody(reply.Body); part != "" {
			s.Events = []Event{{Raw: part}}
		}
		resp.Body = &streamBody{u: u, ctx: ctx, s: s, closed: make(chan struct{})}
		return resp, nil
	}
	resp.Body = io.NopCloser(strings.NewReader(reply.Body))
	return resp, nil
}

func statusOf(r Reply) int {
	if r.Status == 0 {
		return http.StatusOK
	}
	return r.Status
}

// streamBody yields a Stream's events on Read, waiting out the pace there.
type streamBody struct {
	u       *Upstream
	ctx     context.Context
	s       *Stream
	next    int
	pending bytes.Buffer

	closeOnce sync.Once
	closed    chan struct{}
}

func (b *streamBody) Read(p []byte) (int, error) {
	if b.pending.Len() > 0 {
		return b.pending.Read(p)
	}
	select {
	case <-b.closed:
		return 0, errors.New("combotest: read on closed body")
	default:
	}
	if b.next >= len(b.s.Events) {
		if b.s.HangAfter {
			return 0, b.blockOrClose()
		}
		return 0, io.EOF
	}
	if b.next > 0 && b.s.Pace > 0 {
		if err := b.sleep(b.s.Pace); err != nil {
			return 0, err
		}
	}
	b.pending.WriteString(b.s.Events[b.next].Encode())
	b.next++
	return b.pending.Read(p)
}

func (b *streamBody) sleep(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-b.ctx.Done():
		return b.ctx.Err()
	case <-b.closed:
		return errors.New("combotest: body closed")
	case <-b.u.done:
		return errClosed
	}
}

func (b *streamBody) blockOrClose() error {
	select {
	case <-b.ctx.Done():
		return b.ctx.Err()
	case <-b.closed:
		return errors.New("combotest: body closed")
	case <-b.u.done:
		return errClosed
	}
}

func (b *streamBody) Close() error {
	b.closeOnce.Do(func() { close(b.closed) })
	return nil
}

// serveHTTP answers over the loopback server.
func (u *Upstream) serveHTTP(w http.ResponseWriter, r *http.Request) {
	reply, fault, err := u.record(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ctx := r.Context()
	if u.wait(ctx, reply.Latency) != nil {
		return
	}
	switch {
	case reply.Reset:
		resetConnection(w)
		return
	case reply.Hang:
		_ = u.block(ctx)
		return
	}
	for k, v := range reply.Header {
		w.Header()[k] = append([]string(nil), v...)
	}
	if reply.Stream == nil && fault == FaultStall {
		// Promise the whole body, send half of it, then stall.
		w.Header().Set("Content-Length", strconv.Itoa(len(reply.Body)))
		w.WriteHeader(statusOf(reply))
		_, _ = io.WriteString(w, stallBody(reply.Body))
		if flusher, ok := w.(http.Flusher); ok {
			flusher.Flush()
		}
		_ = u.block(ctx)
		return
	}
	if reply.Stream == nil {
		w.WriteHeader(statusOf(reply))
		_, _ = io.WriteString(w, reply.Body)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(statusOf(reply))
	flusher, _ := w.(http.Flusher)
	if reply.Stream.CutAfter > 0 {
		serveCut(w, flusher, reply.Stream)
	}
	for i, ev := range reply.Stream.Events {
		if i > 0 && u.wait(ctx, reply.Stream.Pace) != nil {
			return
		}
		if _, err := io.WriteString(w, ev.Encode()); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
	if reply.Stream.HangAfter {
		_ = u.block(ctx)
	}
}

// resetConnection drops the client's connection with a TCP reset.
func resetConnection(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = conn.Close()
}
