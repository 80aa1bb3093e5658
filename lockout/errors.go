package lockout

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// ErrLocked is matched (with errors.Is) by every [*LockedError].
var ErrLocked = errors.New("lockout: model locked")

// CodeLocked is the stable code of [*LockedError], the exclusion reason a
// router reports for a locked model.
const CodeLocked = "model_lockout"

// LockedError reports that a model is locked on a connection.
type LockedError struct {
	Provider   string
	Connection string
	Model      string
	Reason     Reason
	Until      time.Time     // the model is locked at Until itself
	RetryAfter time.Duration // Until minus the time of the check
}

// Error implements error.
func (e *LockedError) Error() string {
	return fmt.Sprintf("lockout: model %s locked on %s/%s (%s) for %v",
		e.Model, e.Provider, e.Connection, e.Reason, e.RetryAfter)
}

// Is reports whether target is [ErrLocked].
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// Code returns [CodeLocked].
func (e *LockedError) Code() string { return CodeLocked }

// HTTPStatus returns 503, the status of a request whose only target is
// locked.
func (e *LockedError) HTTPStatus() int { return http.StatusServiceUnavailable }
