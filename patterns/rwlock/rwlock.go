package rwlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// ErrUpgrade reports an attempt to take the write side of a read/write lock
// by an owner that holds its read side. Upgrading would deadlock as soon as
// two readers tried it, so it is refused at once; release the read lock and
// acquire the write lock instead (and re-check what you read). It is
// driver.ErrUpgrade, the verdict backends return.
var ErrUpgrade = driver.ErrUpgrade

// RW hands out read/write locks through a lockx.Client. It is safe for
// concurrent use; create one per Client and share it.
type RW struct {
	c          *lockx.Client
	rb         driver.RWBackend
	readerPref bool
	err        error
}

// Option configures an RW.
type Option func(*RW)

// ReaderPreference lets readers enter while a writer waits; only a writer
// holding the key stops them. It raises read throughput at the price of
// writer starvation under a steady read load.
func ReaderPreference() Option { return func(rw *RW) { rw.readerPref = true } }

// New returns an RW over c. If c's backend does not implement
// driver.RWBackend, every call returns an error matching errors.ErrUnsupported.
func New(c *lockx.Client, opts ...Option) *RW {
	rw := &RW{c: c}
	for _, o := range opts {
		if o != nil {
			o(rw)
		}
	}
	switch {
	case c == nil:
		rw.err = &lockx.ArgError{Arg: "client", Reason: "nil"}
	default:
		var rb driver.RWBackend
		ok := driver.As(c.Backend(), &rb)
		if !ok {
			rw.err = fmt.Errorf("rwlock: backend %T does not implement driver.RWBackend: %w", c.Backend(), errors.ErrUnsupported)
		}
		rw.rb = rb
	}
	return rw
}

// RLock obtains a read lock on key, waiting until it is granted, ctx ends,
// the wait budget (lockx.WithWait) is spent or the client is closed. A
// refusal matches lockx.ErrNotAcquired. The options are lockx's per-call
// options (WithWatchdog, WithLease, WithWait, WithQueueTTL, WithBackoff).
func (rw *RW) RLock(ctx context.Context, key string, opts ...lockx.Option) (*lockx.Grant, error) {
	return rw.acquire(ctx, driver.ModeRead, key, opts, true)
}

// TryRLock makes one attempt at a read lock on key.
func (rw *RW) TryRLock(ctx context.Context, key string, opts ...lockx.Option) (*lockx.Grant, error) {
	return rw.acquire(ctx, driver.ModeRead, key, opts, false)
}

// Lock obtains the write lock on key, waiting as RLock does. While it waits,
// new readers are kept out (unless ReaderPreference). Called under a context
// whose owner holds a read lock on key, it fails at once with an error
// matching ErrUpgrade.
func (rw *RW) Lock(ctx context.Context, key string, opts ...lockx.Option) (*lockx.Grant, error) {
	return rw.acquire(ctx, driver.ModeWrite, key, opts, true)
}

// TryLock makes one attempt at the write lock on key.
func (rw *RW) TryLock(ctx context.Context, key string, opts ...lockx.Option) (*lockx.Grant, error) {
	return rw.acquire(ctx, driver.ModeWrite, key, opts, false)
}

// Downgrade turns the write lock w into a read lock without letting another
// writer in between: it takes a read lock under w's owner (granted at once)
// and then releases w. The read lock carries w's token.
func (rw *RW) Downgrade(ctx context.Context, w *lockx.Grant, opts ...lockx.Option) (*lockx.Grant, error) {
	if w == nil {
		return nil, lockx.ErrNotHeld
	}
	if err := context.Cause(w.Context()); err != nil {
		return nil, fmt.Errorf("rwlock: downgrade %q: %w", w.Key(), err)
	}
	r, err := rw.TryRLock(lockx.ContextWithOwner(ctx, w.Owner()), w.Key(), opts...)
	if err != nil {
		return nil, err
	}
	if err := w.Release(ctx); err != nil {
		return r, err
	}
	return r, nil
}

func (rw *RW) acquire(ctx context.Context, mode driver.RWMode, key string, opts []lockx.Option, wait bool) (*lockx.Grant, error) {
	kind := "rlock"
	if mode == driver.ModeWrite {
		kind = "wlock"
	}
	if rw.err != nil {
		return nil, &lockx.KeyError{Op: kind, Key: key, Err: rw.err}
	}
	rb, fair := rw.rb, mode == driver.ModeWrite || !rw.readerPref
	ops := driver.GrantOps{
		Kind:      kind,
		Reentrant: true,
		Acquire: func(ctx context.Context, req driver.Request) (driver.Result, error) {
			req.Fair = fair
			return rb.AcquireRW(ctx, mode, req)
		},
		Extend: func(ctx context.Context, key string, owner lockx.Owner, lease time.Duration) error {
			return rb.ExtendRW(ctx, mode, key, owner, lease)
		},
		Release: func(ctx context.Context, key string, owner lockx.Owner) error {
			return rb.ReleaseRW(ctx, mode, key, owner)
		},
	}
	if wait {
		return rw.c.AcquireGrant(ctx, key, ops, opts...)
	}
	return rw.c.TryAcquireGrant(ctx, key, ops, opts...)
}

// RDo runs fn under a read lock on key: it acquires (waiting as RLock does),
// runs fn with a context that is cancelled if the read lock is lost or ctx
// ends, and releases. If the lock was lost while fn ran, the error matches
// lockx.ErrLost (joined with fn's error).
func (rw *RW) RDo(ctx context.Context, key string, fn func(context.Context) error, opts ...lockx.Option) error {
	return rw.do(ctx, driver.ModeRead, key, fn, opts)
}

// Do runs fn under the write lock on key, as RDo does under a read lock.
func (rw *RW) Do(ctx context.Context, key string, fn func(context.Context) error, opts ...lockx.Option) error {
	return rw.do(ctx, driver.ModeWrite, key, fn, opts)
}

func (rw *RW) do(ctx context.Context, mode driver.RWMode, key string, fn func(context.Context) error, opts []lockx.Option) error {
	if fn == nil {
		return &lockx.KeyError{Op: "do", Key: key, Err: &lockx.ArgError{Arg: "fn", Reason: "nil"}}
	}
	g, err := rw.acquire(ctx, mode, key, opts, true)
	if err != nil {
		return err
	}
	return runUnder(ctx, g, fn)
}

// runUnder runs fn under g's context joined with ctx's cancellation, then
// releases g.
func runUnder(ctx context.Context, g *lockx.Grant, fn func(context.Context) error) error {
	fctx, cancel := context.WithCancelCause(g.Context())
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	ferr := fn(fctx)
	stop()
	cancel(nil)
	return errors.Join(ferr, g.Release(context.WithoutCancel(ctx)))
}
