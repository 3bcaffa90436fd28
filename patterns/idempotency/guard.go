package idempotency

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// Guard runs functions at most once per key: it holds the key's lock while
// the function runs and keeps its outcome in a driver.ResultStore for the
// retention period. It implements lockx.Idempotency; make one per service
// and share it. A Guard is safe for concurrent use.
type Guard struct {
	locks *lockx.Client
	cfg   config
}

var _ lockx.Idempotency = (*Guard)(nil)

// New returns a Guard that locks through locks and stores outcomes in the
// store set with WithStore or, by default, in locks' backend, which must then
// implement driver.ResultStore. An invalid option or a missing store is an
// *lockx.ArgError.
func New(locks *lockx.Client, opts ...Option) (*Guard, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.err != nil {
		return nil, cfg.err
	}
	if locks == nil {
		return nil, &lockx.ArgError{Arg: "client", Reason: "nil"}
	}
	if cfg.store == nil {
		var s driver.ResultStore
		ok := driver.As(locks.Backend(), &s)
		if !ok {
			return nil, &lockx.ArgError{Arg: "store", Reason: fmt.Sprintf("backend %T keeps no results: pass WithStore", locks.Backend())}
		}
		cfg.store = s
	}
	return &Guard{locks: locks, cfg: cfg}, nil
}

// Store returns the store the Guard keeps outcomes in.
func (g *Guard) Store() driver.ResultStore { return g.cfg.store }

// Retention returns how long the Guard keeps outcomes.
func (g *Guard) Retention() time.Duration { return g.cfg.retention }

// Scope returns the key under which principal's key is kept, so that two
// principals using the same idempotency key never see each other's
// outcomes. The principal's length is part of the result, so no choice of
// principal and key can produce another pair's scoped key.
func Scope(principal, key string) string {
	return strconv.Itoa(len(principal)) + ":" + principal + ":" + key
}

// Run implements lockx.Idempotency. The steps:
//
//  1. If key has an outcome, replay it (ErrKeyReused if fingerprint is
//     non-empty and differs from the stored one).
//  2. Take key's lock: at once, or waiting up to WithWait. Refused, it
//     returns ErrInProgress (or the outcome, if the holder has finished).
//  3. Look again under the lock: a call that finished between 1 and 2 has
//     stored its outcome by now.
//  4. Run fn with a context cancelled if the lock is lost or ctx ends.
//  5. Unless fn's error is retryable, store the outcome — only if no
//     outcome is stored yet, so if the lock was ever granted twice, the
//     first outcome stays and is what this call returns as well.
//  6. Release the lock.
//
// If fn panics, nothing is stored, the lock is released and the panic goes
// on. If the process dies inside fn, nothing is stored and the lock's lease
// runs out, so a later call runs fn again: fn must be safe to run again after
// a crash, or use RunTx. If the outcome cannot be stored, Run returns fn's
// value and an error that matches both fn's error and lockx.ErrUnavailable.
func (g *Guard) Run(ctx context.Context, key string, fingerprint []byte, fn func(context.Context) ([]byte, error)) (value []byte, replayed bool, err error) {
	k, err := g.check(ctx, key, fn != nil)
	if err != nil {
		return nil, false, err
	}
	if v, r, err, done := g.lookup(ctx, g.cfg.store, key, k, fingerprint); done {
		return v, r, err
	}
	l, err := g.lock(ctx, key, k)
	if errors.Is(err, lockx.ErrInProgress) {
		// The holder may have finished since: then its outcome is the answer.
		if v, r, lerr, done := g.lookup(ctx, g.cfg.store, key, k, fingerprint); done {
			return v, r, lerr
		}
	}
	if err != nil {
		return nil, false, err
	}
	defer l.Release(context.WithoutCancel(ctx))
	if v, r, err, done := g.lookup(ctx, g.cfg.store, key, k, fingerprint); done {
		return v, r, err
	}

	v, ferr := runUnder(ctx, l, fn)
	if ferr != nil && (IsRetry(ferr) || g.cfg.retryable(ferr)) {
		return nil, false, ferr
	}
	o := g.outcome(fingerprint, v, ferr)
	stored, saved, serr := g.cfg.store.SaveResult(context.WithoutCancel(ctx), k, o, g.cfg.retention)
	if serr != nil {
		return v, false, errors.Join(ferr, keyErr(key, fmt.Errorf("outcome not stored: %w", serr)))
	}
	if !saved {
		return g.replay(key, stored, fingerprint)
	}
	return v, false, ferr
}

// Forget deletes key's outcome, so that the next call with key runs again.
func (g *Guard) Forget(ctx context.Context, key string) error {
	k, err := g.check(ctx, key, true)
	if err != nil {
		return err
	}
	return keyErr(key, g.cfg.store.DeleteResult(ctx, k))
}

func (g *Guard) check(ctx context.Context, key string, haveFn bool) (string, error) {
	switch {
	case ctx == nil:
		return "", keyErr(key, &lockx.ArgError{Arg: "ctx", Reason: "nil"})
	case !haveFn:
		return "", keyErr(key, &lockx.ArgError{Arg: "fn", Reason: "nil"})
	case key == "":
		return "", keyErr(key, &lockx.ArgError{Arg: "key", Reason: "empty"})
	}
	k := g.cfg.prefix + key
	if err := driver.CheckResultArgs(k, g.cfg.retention); err != nil {
		return "", keyErr(key, err)
	}
	return k, nil
}

// lookup replays key's outcome if there is one. done is false only when
// there is none; a store failure is final (fail closed: run nothing).
func (g *Guard) lookup(ctx context.Context, store driver.ResultStore, key, k string, fp []byte) (v []byte, replayed bool, err error, done bool) {
	o, err := store.LoadResult(ctx, k)
	switch {
	case err == nil:
		v, replayed, err = g.replay(key, o, fp)
		return v, replayed, err, true
	case errors.Is(err, driver.ErrNoResult):
		return nil, false, nil, false
	default:
		return nil, false, keyErr(key, err), true
	}
}

// lock takes key's lock, at once or within the wait; a refusal is
// ErrInProgress. It acquires under a fresh owner: a call nested in fn with
// the same key must not re-enter its caller's lock and run again, but be
// told that the key is in progress.
func (g *Guard) lock(ctx context.Context, key, k string) (*lockx.Lock, error) {
	var (
		l   *lockx.Lock
		err error
	)
	lctx := lockx.ContextWithOwner(ctx, lockx.NewOwner())
	if g.cfg.wait > 0 {
		opts := append(append([]lockx.Option(nil), g.cfg.lockOpts...), lockx.WithWait(g.cfg.wait))
		l, err = g.locks.Acquire(lctx, k, opts...)
	} else {
		l, err = g.locks.TryAcquire(lctx, k, g.cfg.lockOpts...)
	}
	if err == nil {
		return l, nil
	}
	if !errors.Is(err, lockx.ErrNotAcquired) || ctx.Err() != nil {
		return nil, err
	}
	return nil, keyErr(key, lockx.ErrInProgress)
}

// runUnder runs fn with a context that ends when the lock is lost (cause
// ErrLost) or ctx ends.
func runUnder(ctx context.Context, l *lockx.Lock, fn func(context.Context) ([]byte, error)) ([]byte, error) {
	fctx, cancel := context.WithCancelCause(l.Context())
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	defer func() {
		stop()
		cancel(nil)
	}()
	return fn(fctx)
}

func (g *Guard) outcome(fp, v []byte, err error) driver.Outcome {
	o := driver.Outcome{Fingerprint: fp, Created: time.Now()}
	if err == nil {
		o.Value = v
		return o
	}
	o.Failed, o.Err = true, err.Error()
	for _, s := range g.cfg.sentinels {
		if errors.Is(err, s) {
			o.Code = s.Error()
			break
		}
	}
	return o
}

func (g *Guard) replay(key string, o driver.Outcome, fp []byte) ([]byte, bool, error) {
	if len(fp) > 0 && len(o.Fingerprint) > 0 && subtle.ConstantTimeCompare(fp, o.Fingerprint) != 1 {
		return nil, false, keyErr(key, lockx.ErrKeyReused)
	}
	if !o.Failed {
		return o.Value, true, nil
	}
	se := &lockx.StoredError{Key: key, Message: o.Err}
	if o.Code != "" {
		for _, s := range g.cfg.sentinels {
			if s.Error() == o.Code {
				se.Err = s
				break
			}
		}
	}
	return nil, true, se
}

func keyErr(key string, err error) error {
	if err == nil {
		return nil
	}
	var ke *lockx.KeyError
	if errors.As(err, &ke) {
		return err
	}
	return &lockx.KeyError{Op: "idempotent", Key: key, Err: err}
}
