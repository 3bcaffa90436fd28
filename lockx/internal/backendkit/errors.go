package backendkit

import (
	"context"
	"errors"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// Unavailable classifies err, the failure of operation op: an argument error
// (lockx.ErrInvalidArgument) stays what it is, since retrying cannot help
// it; anything else matches lockx.ErrUnavailable and keeps err as its cause
// (driver.Unavailable). A nil err stays nil.
func Unavailable(op string, err error) error {
	if errors.Is(err, lockx.ErrInvalidArgument) {
		return err
	}
	return driver.Unavailable(op, err)
}

// Fail classifies err, the failure of a call made under ctx: once ctx has
// ended, the caller gave up and learns that (ctx's error, or err if it
// already matches it, so that errors.Is(err, context.Canceled) holds);
// otherwise as Unavailable.
func Fail(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		if errors.Is(err, cerr) {
			return err
		}
		return cerr
	}
	return Unavailable(op, err)
}

// Ended returns nil while ctx is live, and once it has ended an error
// matching lockx.ErrUnavailable with ctx's cause: the backend could not
// finish op in the time the caller gave.
func Ended(ctx context.Context, op string) error {
	if ctx.Err() == nil {
		return nil
	}
	return Unavailable(op, context.Cause(ctx))
}
