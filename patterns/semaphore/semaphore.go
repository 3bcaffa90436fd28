package semaphore

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// Semaphore is a named counting semaphore. It is safe for concurrent use.
type Semaphore struct {
	c       *lockx.Client
	sb      driver.SemaphoreBackend
	key     string
	limit   atomic.Int64
	nonFair bool
	err     error
}

// Option configures a Semaphore.
type Option func(*Semaphore)

// NonFair lets a request that fits take permits even when others are queued.
// It raises throughput but can starve large (AcquireN) requests.
func NonFair() Option { return func(s *Semaphore) { s.nonFair = true } }

// New returns the semaphore key with limit permits, served through c. A
// limit below 1, a nil client, or a backend that does not implement
// driver.SemaphoreBackend (errors.ErrUnsupported) make every call fail.
func New(c *lockx.Client, key string, limit int64, opts ...Option) *Semaphore {
	s := &Semaphore{c: c, key: key}
	s.limit.Store(limit)
	for _, o := range opts {
		if o != nil {
			o(s)
		}
	}
	switch {
	case c == nil:
		s.err = &lockx.ArgError{Arg: "client", Reason: "nil"}
	case limit <= 0:
		s.err = &lockx.ArgError{Arg: "limit", Reason: "must be positive"}
	default:
		var sb driver.SemaphoreBackend
		ok := driver.As(c.Backend(), &sb)
		if !ok {
			s.err = fmt.Errorf("semaphore: backend %T does not implement driver.SemaphoreBackend: %w", c.Backend(), errors.ErrUnsupported)
		}
		s.sb = sb
	}
	return s
}

// Key returns the semaphore's name.
func (s *Semaphore) Key() string { return s.key }

// Limit returns the capacity this process requests with.
func (s *Semaphore) Limit() int64 { return s.limit.Load() }

// SetLimit changes the capacity at runtime (see the package documentation).
// A limit below 1 is an *lockx.ArgError.
func (s *Semaphore) SetLimit(n int64) error {
	if n <= 0 {
		return &lockx.ArgError{Arg: "limit", Reason: "must be positive"}
	}
	s.limit.Store(n)
	return nil
}

// Acquire takes one permit, waiting until it is granted, ctx ends, the wait
// budget (lockx.WithWait) is spent or the client is closed. A refusal matches
// lockx.ErrNotAcquired. The options are lockx's per-call options
// (WithWatchdog, WithLease, WithWait, WithQueueTTL, WithBackoff).
func (s *Semaphore) Acquire(ctx context.Context, opts ...lockx.Option) (*Permit, error) {
	return s.acquire(ctx, 1, opts, true)
}

// AcquireN takes n permits at once (1 ≤ n ≤ Limit), waiting as Acquire does.
func (s *Semaphore) AcquireN(ctx context.Context, n int64, opts ...lockx.Option) (*Permit, error) {
	return s.acquire(ctx, n, opts, true)
}

// TryAcquire makes one attempt to take one permit.
func (s *Semaphore) TryAcquire(ctx context.Context, opts ...lockx.Option) (*Permit, error) {
	return s.acquire(ctx, 1, opts, false)
}

// TryAcquireN makes one attempt to take n permits.
func (s *Semaphore) TryAcquireN(ctx context.Context, n int64, opts ...lockx.Option) (*Permit, error) {
	return s.acquire(ctx, n, opts, false)
}

// Usage reports the permits in use, their holders and the queued waiters.
func (s *Semaphore) Usage(ctx context.Context) (driver.PermitUsage, error) {
	if s.err != nil {
		return driver.PermitUsage{}, &lockx.KeyError{Op: "usage", Key: s.key, Err: s.err}
	}
	u, err := s.sb.Permits(ctx, s.key)
	if err != nil {
		return u, &lockx.KeyError{Op: "usage", Key: s.key, Err: err}
	}
	return u, nil
}

func (s *Semaphore) acquire(ctx context.Context, n int64, opts []lockx.Option, wait bool) (*Permit, error) {
	if s.err != nil {
		return nil, &lockx.KeyError{Op: "permit", Key: s.key, Err: s.err}
	}
	limit := s.limit.Load()
	switch {
	case n <= 0:
		return nil, &lockx.KeyError{Op: "permit", Key: s.key, Err: &lockx.ArgError{Arg: "permits", Reason: "must be positive"}}
	case n > limit:
		return nil, &lockx.KeyError{Op: "permit", Key: s.key, Err: &lockx.ArgError{Arg: "permits", Reason: fmt.Sprintf("%d is more than the limit %d", n, limit)}}
	}
	sb, fair := s.sb, !s.nonFair
	ops := driver.GrantOps{
		Kind: "permit",
		Acquire: func(ctx context.Context, req driver.Request) (driver.Result, error) {
			req.Fair = fair
			return sb.AcquirePermits(ctx, driver.PermitRequest{Request: req, Limit: s.limit.Load(), Count: n})
		},
		Extend:  sb.ExtendPermits,
		Release: sb.ReleasePermits,
	}
	var g *lockx.Grant
	var err error
	if wait {
		g, err = s.c.AcquireGrant(ctx, s.key, ops, opts...)
	} else {
		g, err = s.c.TryAcquireGrant(ctx, s.key, ops, opts...)
	}
	if err != nil {
		return nil, err
	}
	return &Permit{g: g, n: n}, nil
}

// Permit is a handle on permits held from a Semaphore. All methods are safe
// for concurrent use; on a nil *Permit they report lockx.ErrNotHeld.
type Permit struct {
	g *lockx.Grant
	n int64
}

// N returns how many permits the handle holds.
func (p *Permit) N() int64 {
	if p == nil {
		return 0
	}
	return p.n
}

// Key returns the semaphore's name.
func (p *Permit) Key() string { return p.grant().Key() }

// Owner returns the permit's owner id.
func (p *Permit) Owner() lockx.Owner { return p.grant().Owner() }

// Token returns the permit's token, unique and increasing per semaphore.
func (p *Permit) Token() lockx.Token { return p.grant().Token() }

// Lost returns a channel closed when the permit's lease is lost.
func (p *Permit) Lost() <-chan struct{} { return p.grant().Lost() }

// Context returns a context cancelled when the permit is lost (cause
// lockx.ErrLost), released (lockx.ErrReleased) or its client closed.
func (p *Permit) Context() context.Context { return p.grant().Context() }

// Extend resets the permit's lease to ttl.
func (p *Permit) Extend(ctx context.Context, ttl time.Duration) error {
	return p.grant().Extend(ctx, ttl)
}

// Release returns the permits. Releasing twice returns lockx.ErrNotHeld;
// releasing a lost permit lockx.ErrLost.
func (p *Permit) Release(ctx context.Context) error { return p.grant().Release(ctx) }

func (p *Permit) grant() *lockx.Grant {
	if p == nil {
		return nil
	}
	return p.g
}

// Do takes one permit (waiting as Acquire does), runs fn with a context that
// is cancelled if the permit is lost or ctx ends, and returns the permit. If
// the permit was lost while fn ran, the error matches lockx.ErrLost (joined
// with fn's error).
func (s *Semaphore) Do(ctx context.Context, fn func(context.Context) error, opts ...lockx.Option) error {
	if fn == nil {
		return &lockx.KeyError{Op: "do", Key: s.key, Err: &lockx.ArgError{Arg: "fn", Reason: "nil"}}
	}
	p, err := s.acquire(ctx, 1, opts, true)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(p.Context())
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	ferr := fn(fctx)
	stop()
	cancel(nil)
	return errors.Join(ferr, p.Release(context.WithoutCancel(ctx)))
}
