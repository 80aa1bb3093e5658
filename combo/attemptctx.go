package combo

import (
	"context"
	"sync"
	"sync/atomic"
)

// attemptCtx is an attempt's context when the request's context can never
// end (its Done is nil, as for context.Background or a context from
// context.WithoutCancel). The attempt's own end and its timer are then the
// only ways it ends, so it needs no link to the request's context: it lives
// in the attempt's memory, where context.WithCancel would make two
// allocations, and its Done channel is made only when asked for. A request
// whose context can end gets context.WithCancel's, which ends with it at
// once.
//
// Contexts derived from it end with it: context.WithCancel and its kin find
// its AfterFunc method and register there, without a goroutine of their own.
type attemptCtx struct {
	context.Context // the request's, which never ends

	ended atomic.Bool // the fast answer of Err
	mu    sync.Mutex
	done  chan struct{} // made by the first Done
	after *[]*afterEntry
}

// afterEntry is one function registered with AfterFunc.
type afterEntry struct{ f func() }

func (c *attemptCtx) Done() <-chan struct{} {
	c.mu.Lock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.ended.Load() {
			close(c.done)
		}
	}
	d := c.done
	c.mu.Unlock()
	return d
}

func (c *attemptCtx) Err() error {
	if c.ended.Load() {
		return context.Canceled
	}
	return nil
}

// AfterFunc arranges for f to run once c has ended, and returns a func
// that unregisters it (true if it did so before f ran). It is what
// context.WithCancel and context.AfterFunc use to tie a derived context to
// c. f runs in the goroutine that ends c; registered after c has ended,
// it runs in a goroutine of its own, because those callers hold a lock of
// theirs while they register and f takes it.
func (c *attemptCtx) AfterFunc(f func()) (stop func() bool) {
	e := &afterEntry{f: f}
	c.mu.Lock()
	if c.ended.Load() {
		c.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	if c.after == nil {
		c.after = new([]*afterEntry)
	}
	*c.after = append(*c.after, e)
	c.mu.Unlock()
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.after == nil {
			return false
		}
		for i, x := range *c.after {
			if x == e {
				*c.after = append((*c.after)[:i], (*c.after)[i+1:]...)
				return true
			}
		}
		return false
	}
}

// cancel ends c (a second call does nothing) and runs what AfterFunc
// registered.
func (c *attemptCtx) cancel() {
	c.mu.Lock()
	if c.ended.Load() {
		c.mu.Unlock()
		return
	}
	c.ended.Store(true)
	if c.done != nil {
		close(c.done)
	}
	var after []*afterEntry
	if c.after != nil {
		after, c.after = *c.after, nil
	}
	c.mu.Unlock()
	for _, e := range after {
		e.f()
	}
}

// String names the context as the standard library's do.
func (c *attemptCtx) String() string { return "combo.attemptContext" }
