package lockx

import (
	"errors"
	"fmt"

	"github.com/lockx-go/lockx/lockx/driver"
)

// Sentinel errors. Test for them with errors.Is: lockx wraps them with the
// key and, where a context ended, joins them with the context's error so that
// errors.Is(err, context.DeadlineExceeded) keeps working too.
//
// Most are the values of package driver (lockx.ErrNotHeld == driver.ErrNotHeld),
// so a verdict a backend returns matches them as it is.
var (
	// ErrNotAcquired reports that the lock is held by another owner and was
	// not granted within the call (one try for TryAcquire, the wait budget or
	// the context for Acquire).
	ErrNotAcquired = driver.ErrNotAcquired
	// ErrNotHeld reports an Extend, TTL or Release of a lock the caller does
	// not hold (any more). It never means that another owner's lock was
	// touched.
	ErrNotHeld = driver.ErrNotHeld
	// ErrLost reports that a held lock's lease was lost: renewal failed or was
	// impossible and the lease may have expired on the backend.
	ErrLost = driver.ErrLost
	// ErrReleased is the cause of a lock context cancelled by Release.
	ErrReleased = errors.New("lockx: lock released")
	// ErrUnavailable reports that the backend could not be reached or did not
	// answer. lockx fails closed: an unavailable backend never grants a lock.
	ErrUnavailable = driver.ErrUnavailable
	// ErrClosed reports use of a Client after Close, or of a backend after
	// its Close (which a Client's Close calls). A Client's Acquire gives up
	// on it at once: a closed backend never grants again.
	ErrClosed = driver.ErrClosed
	// ErrInvalidArgument is matched (errors.Is) by every *ArgError.
	ErrInvalidArgument = driver.ErrInvalidArgument
)

// ArgError reports a bad argument: an empty or oversized key, a non-positive
// lease, a nil function. It matches ErrInvalidArgument with errors.Is.
type ArgError = driver.ArgError

// keyError annotates err with the lock key it concerns.
func keyError(op, key string, err error) error {
	if err == nil {
		return nil
	}
	return &KeyError{Op: op, Key: key, Err: err}
}

// KeyError is returned by Client and Lock methods: it names the operation and
// the key and wraps the cause (ErrNotAcquired, ErrNotHeld, a context error, …).
type KeyError struct {
	Op  string // "acquire", "release", "extend", "ttl", "do"
	Key string
	Err error
}

// Error implements error.
func (e *KeyError) Error() string {
	msg := e.Err.Error()
	return fmt.Sprintf("lockx: %s %q: %s", e.Op, truncate(e.Key, 64), trimPrefix(msg))
}

// Unwrap returns the cause.
func (e *KeyError) Unwrap() error { return e.Err }

func trimPrefix(s string) string {
	const p = "lockx: "
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
