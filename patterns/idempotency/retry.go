package idempotency

import (
	"context"
	"errors"

	"github.com/lockx-go/lockx/lockx"
)

// Retry marks err as retryable: an idempotent call that fails with it
// stores nothing, whatever the Guard's predicate says, so the next call with
// the key runs again. Use it for failures that say nothing about the
// request, such as a timeout talking to a downstream service. Retry(nil) is
// nil.
func Retry(err error) error {
	if err == nil {
		return nil
	}
	return &retryError{err}
}

type retryError struct{ err error }

func (e *retryError) Error() string { return e.err.Error() }
func (e *retryError) Unwrap() error { return e.err }

// IsRetry reports whether err was marked with Retry.
func IsRetry(err error) bool {
	var r *retryError
	return errors.As(err, &r)
}

// Retryable is the default predicate of WithRetryable. It treats as
// retryable the errors that say the work was interrupted rather than
// decided: the context ended, the key's lock was lost, a backend was
// unavailable, a nested call was in progress, or the error was marked with
// Retry. Everything else — a declined card, a validation failure, a
// conflict — is terminal and replayed.
func Retryable(err error) bool {
	return IsRetry(err) ||
		errors.Is(err, context.Canceled) ||
		errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, lockx.ErrLost) ||
		errors.Is(err, lockx.ErrUnavailable) ||
		errors.Is(err, lockx.ErrInProgress) ||
		errors.Is(err, lockx.ErrClosed)
}
