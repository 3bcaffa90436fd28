package driver

import (
	"errors"
	"fmt"
)

// Verdicts a backend returns, and the errors both sides of the contract
// match with errors.Is. Package lockx re-exports the ones its users test for
// (lockx.ErrNotHeld is ErrNotHeld, the same value), so an error a backend
// returns matches the user's sentinel without translation.
var (
	// ErrNotAcquired reports that the lock is held by another owner and was
	// not granted within the call.
	ErrNotAcquired = errors.New("lockx: lock not acquired")
	// ErrNotHeld reports an Extend, TTL or Release of a lock the caller does
	// not hold (any more). It never means that another owner's lock was
	// touched.
	ErrNotHeld = errors.New("lockx: lock not held")
	// ErrLost reports that a held lock's lease was lost: renewal failed or was
	// impossible and the lease may have expired on the backend.
	ErrLost = errors.New("lockx: lock lost")
	// ErrUnavailable reports that the backend could not be reached or did not
	// answer: the outcome of the call is unknown. Wrap such failures with
	// Unavailable. An unavailable backend never grants a lock.
	ErrUnavailable = errors.New("lockx: backend unavailable")
	// ErrClosed reports use of a backend after its Close. Backends return an
	// error matching it for calls after Close, and the Client gives up on it
	// at once: a closed backend never grants again.
	ErrClosed = errors.New("lockx: closed")
	// ErrInvalidArgument is matched (errors.Is) by every *ArgError.
	ErrInvalidArgument = errors.New("lockx: invalid argument")
	// ErrNoRetry marks a failure that a retry within the same call cannot
	// mend: the Client's Acquire gives up at once on an error matching it
	// instead of waiting out its budget. A wrapper that refuses calls for a
	// while without asking the backend — a circuit breaker that is open —
	// returns errors matching both ErrUnavailable (the outcome is unknown)
	// and ErrNoRetry (asking again now is pointless). The core thus learns
	// "give up" from the error alone and knows no wrapper by name.
	ErrNoRetry = errors.New("lockx: no retry")
)

// ArgError reports a bad argument: an empty or oversized key, a non-positive
// lease, a nil function. It matches ErrInvalidArgument with errors.Is.
type ArgError struct {
	Arg    string // the argument's name, e.g. "key" or "lease"
	Reason string // what is wrong with it
}

// Error implements error.
func (e *ArgError) Error() string {
	return fmt.Sprintf("lockx: invalid %s: %s", e.Arg, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidArgument) true for every *ArgError.
func (e *ArgError) Is(target error) bool { return target == ErrInvalidArgument }

// Unavailable wraps err, a transport or server failure of a backend, so that
// it matches ErrUnavailable while keeping the cause visible to errors.Is and
// errors.As. Backends use it for every error that is not a verdict.
func Unavailable(op string, err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	return &unavailableError{op: op, err: err}
}

type unavailableError struct {
	op  string
	err error
}

func (e *unavailableError) Error() string {
	return "lockx: backend unavailable: " + e.op + ": " + e.err.Error()
}

func (e *unavailableError) Unwrap() []error { return []error{ErrUnavailable, e.err} }

// truncate shortens s to at most n bytes plus an ellipsis, for keys quoted
// in error messages.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
