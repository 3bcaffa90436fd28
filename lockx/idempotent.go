package lockx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
)

// Idempotency in lockx is split the way database/sql splits drivers from
// the front end. The ResultStore capability a backend implements and the
// Outcome it stores are in package driver; this file holds what users see:
// the verdicts (ErrInProgress, ErrKeyReused, *StoredError) and the typed
// entry points IdempotentWith and Idempotent. The machinery — lock, look up,
// run, decide what is terminal, store — lives once in package
// patterns/idempotency, whose Guard implements the Idempotency interface
// below.
//
// IdempotentWith takes the Guard as an argument and touches no global
// state; it is the form for libraries and for programs with more than one
// guard. Idempotent is a shorthand over a process-wide default, set once at
// start-up with SetDefaultIdempotency, for the same reason and in the same
// shape as log/slog's slog.SetDefault: code deep in a call tree can record
// a side effect without a guard being threaded through every layer, while
// the package that builds guards (patterns/idempotency imports lockx, so
// lockx cannot build one) stays the only one that knows how.

// Verdicts of an idempotent call. Test for them with errors.Is.
var (
	// ErrInProgress reports that another call with the same key is running
	// and did not finish within the caller's wait. Nothing was run and
	// nothing was stored: retry later.
	ErrInProgress = errors.New("lockx: idempotent call in progress")
	// ErrKeyReused reports a key that was first used for a different
	// request (its fingerprint differs). Nothing was run.
	ErrKeyReused = errors.New("lockx: idempotency key reused for a different request")
)

// StoredError is the terminal error of an earlier call with the same key,
// replayed from the store. Message is the original error's text. Err is the
// sentinel the original error matched among those registered with the
// Guard (patterns/idempotency.WithErrors), so errors.Is works across
// processes; nil if none matched.
type StoredError struct {
	Key     string
	Message string
	Err     error
}

// Error implements error.
func (e *StoredError) Error() string { return e.Message }

// Unwrap returns the registered sentinel the original error matched, if any.
func (e *StoredError) Unwrap() error { return e.Err }

// Idempotency runs a function at most once per key and replays its outcome
// to every later call with the key, until the outcome's retention ends.
// *idempotency.Guard (package patterns/idempotency) is the implementation.
type Idempotency interface {
	// Run runs fn unless key already has an outcome, stores fn's outcome
	// unless fn's error is retryable, and returns fn's value and error.
	// For a key that has an outcome it returns the stored value (replayed
	// true) or a *StoredError, without running fn; a non-empty fingerprint
	// different from the stored one gives ErrKeyReused. While another call
	// with key runs, Run waits as configured and then returns ErrInProgress.
	Run(ctx context.Context, key string, fingerprint []byte, fn func(context.Context) ([]byte, error)) (value []byte, replayed bool, err error)
}

type idempotencyBox struct{ i Idempotency }

var defaultIdempotency atomic.Pointer[idempotencyBox]

// SetDefaultIdempotency makes i the Idempotency used by Idempotent. Call it
// once at start-up with a Guard:
//
//	guard, err := idempotency.New(locks)
//	lockx.SetDefaultIdempotency(guard)
//
// A nil i removes the default.
func SetDefaultIdempotency(i Idempotency) {
	if i == nil {
		defaultIdempotency.Store(nil)
		return
	}
	defaultIdempotency.Store(&idempotencyBox{i})
}

// DefaultIdempotency returns the Idempotency set by SetDefaultIdempotency,
// or nil.
func DefaultIdempotency() Idempotency {
	if b := defaultIdempotency.Load(); b != nil {
		return b.i
	}
	return nil
}

// Idempotent runs fn at most once for key through the process-wide default
// and returns its result; later calls with key get the stored result, or the
// stored terminal error as a *StoredError, without running fn. See
// IdempotentWith, which takes the guard as an argument instead.
//
// The default is whatever SetDefaultIdempotency last set — at start-up,
// once, as with slog.SetDefault — so that code far from main can use it
// without a guard passed down to it. Without a default, Idempotent fails
// with an *ArgError saying so and runs nothing.
func Idempotent[T any](ctx context.Context, key string, fn func(context.Context) (T, error)) (T, error) {
	i := DefaultIdempotency()
	if i == nil {
		var zero T
		return zero, keyError("idempotent", key, &ArgError{Arg: "idempotency", Reason: "no default set: call lockx.SetDefaultIdempotency"})
	}
	return IdempotentWith(ctx, i, key, fn)
}

// IdempotentWith is Idempotent on an explicit Idempotency (a Guard): it
// reads no package default and works whether or not one is set. T is stored as JSON, so its
// exported fields are what a replay returns; fn's context is cancelled if
// the key's lock is lost or ctx ends.
//
// A call while another with key runs waits as the Guard is configured to,
// then fails with ErrInProgress. A retryable error (the Guard's predicate)
// is returned without being stored, so the next call runs fn again; any
// other error is stored and replayed.
func IdempotentWith[T any](ctx context.Context, i Idempotency, key string, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	if i == nil {
		return zero, keyError("idempotent", key, &ArgError{Arg: "idempotency", Reason: "nil"})
	}
	if fn == nil {
		return zero, keyError("idempotent", key, &ArgError{Arg: "fn", Reason: "nil"})
	}
	var fresh T
	ran := false
	b, replayed, err := i.Run(ctx, key, nil, func(ctx context.Context) ([]byte, error) {
		ran = true
		v, err := fn(ctx)
		fresh = v
		if err != nil {
			return nil, err
		}
		b, merr := json.Marshal(v)
		if merr != nil {
			return nil, fmt.Errorf("lockx: idempotent %q: encode result: %w", truncate(key, 64), merr)
		}
		return b, nil
	})
	if ran && !replayed {
		// fn's own value and error, not a decoded copy. (replayed after
		// running means an earlier outcome won the store: return that.)
		return fresh, err
	}
	if err != nil {
		return zero, err
	}
	var v T
	if len(b) > 0 {
		if derr := json.Unmarshal(b, &v); derr != nil {
			return zero, keyError("idempotent", key, fmt.Errorf("decode stored result: %w", derr))
		}
	}
	return v, nil
}
