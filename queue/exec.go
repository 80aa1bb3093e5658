package queue

import (
	"context"
	"errors"
)

// ExecutionContext returns a context for running a request on key that is
// cancelled after key's ExecutionTimeout, with an error matching
// [ErrExecutionTimeout] as its cause (see context.Cause). Call cancel when
// the run ends.
func (q *Queue) ExecutionContext(ctx context.Context, key string) (context.Context, context.CancelFunc) {
	d := q.settingsFor(key).ExecutionTimeout
	e := newError(CodeExecutionTimeout, key)
	e.Budget = d
	return context.WithTimeoutCause(ctx, d, e)
}

// Do waits for a slot on key as [Queue.Acquire] does, then runs fn with a
// context bounded by the key's ExecutionTimeout and frees the slot when fn
// returns. If the execution budget ran out and fn returned an error, Do
// returns an [*Error] matching [ErrExecutionTimeout] that wraps fn's error;
// otherwise it returns what fn returned. fn should honour its context: Do
// cannot stop it.
func (q *Queue) Do(ctx context.Context, key string, fn func(context.Context) error) error {
	release, err := q.Acquire(ctx, key)
	if err != nil {
		return err
	}
	defer release()
	ectx, cancel := q.ExecutionContext(ctx, key)
	defer cancel()
	err = fn(ectx)
	if err == nil {
		return nil
	}
	var e *Error
	if cause := context.Cause(ectx); ectx.Err() != nil && errors.As(cause, &e) && e.Code == CodeExecutionTimeout {
		return e.withErr(err)
	}
	return err
}
