package middleware

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/lockx-go/lockx/lockx"
)

// KeyFunc derives the lock key of a request: a path parameter, a header, a
// field of the body. An empty key with a nil error lets the request through
// without a lock; an error is answered 400 Bad Request.
type KeyFunc func(r *http.Request) (string, error)

// PathKey returns a KeyFunc that locks prefix + the path parameter name
// (http.Request.PathValue), e.g. PathKey("account:", "id").
func PathKey(prefix, name string) KeyFunc {
	return func(r *http.Request) (string, error) {
		if v := r.PathValue(name); v != "" {
			return prefix + v, nil
		}
		return "", nil
	}
}

// Serializer runs requests one at a time per lock key: the logic of
// Serialize, shared with echomw.
type Serializer struct {
	locks      *lockx.Client
	methods    map[string]bool
	wait       time.Duration
	opts       []lockx.Option
	retryAfter time.Duration
}

// NewSerializer returns a serializer taking locks from locks, configured by
// opts (WithMethods, WithWait, WithLockOptions, WithRetryAfter).
func NewSerializer(locks *lockx.Client, opts ...Option) (*Serializer, error) {
	cfg := newConfig(opts)
	return newSerializer(locks, &cfg)
}

func newSerializer(locks *lockx.Client, cfg *config) (*Serializer, error) {
	if locks == nil {
		return nil, errors.New("lockx/middleware: serialize requires a *lockx.Client")
	}
	if cfg.wait < 0 {
		return nil, errors.New("lockx/middleware: serialize wait must not be negative")
	}
	opts := append([]lockx.Option{}, cfg.lockOpts...)
	if cfg.wait > 0 {
		opts = append(opts, lockx.WithWait(cfg.wait))
	}
	return &Serializer{locks: locks, methods: methodSet(cfg.methods), wait: cfg.wait, opts: opts, retryAfter: cfg.retryAfter}, nil
}

// Enter takes the lock for key on behalf of a request with method, waiting
// up to the wait budget. It returns the context the handler must run under —
// cancelled with cause lockx.ErrLost if the lock is lost, and carrying the
// lock (lockx.LockFromContext) so Transport stamps calls made under it — and
// done, which releases the lock after the handler. An empty key or a method
// the serializer does not apply to returns ctx and a no-op done.
//
// A refusal is a *Problem: 423 Locked with Retry-After when the resource
// stayed busy for the whole budget, 400 for an invalid key, and 503 when the
// lock backend could not answer or the request ended while waiting.
//
// Busy is 423 rather than 409: the request is fine and will succeed later,
// which is what 423 and Retry-After say, while 409 from Fencing means the
// client's lock is stale and retrying the same request cannot help.
func (s *Serializer) Enter(ctx context.Context, method, key string) (context.Context, func(), error) {
	if key == "" || (s.methods != nil && !s.methods[method]) {
		return ctx, func() {}, nil
	}
	var (
		l   *lockx.Lock
		err error
	)
	if s.wait > 0 {
		l, err = s.locks.Acquire(ctx, key, s.opts...)
	} else {
		l, err = s.locks.TryAcquire(ctx, key, s.opts...)
	}
	if err != nil {
		return ctx, func() {}, s.problem(key, err)
	}
	hctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(l.Context(), func() { cancel(context.Cause(l.Context())) })
	return lockx.ContextWithLock(hctx, l), func() {
		stop()
		cancel(nil)
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer rcancel()
		_ = l.Release(rctx) // a lost lock was already signalled through hctx
	}, nil
}

func (s *Serializer) problem(key string, err error) *Problem {
	var p *Problem
	switch {
	case errors.Is(err, lockx.ErrInvalidArgument):
		p = newProblem(problemLockKey, http.StatusBadRequest, "Malformed lock key", trimLockx(err.Error()), err)
	case errors.Is(err, lockx.ErrUnavailable), errors.Is(err, lockx.ErrClosed),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		p = newProblem(problemUnavailable, http.StatusServiceUnavailable, "Lock could not be taken", "", err)
		p.RetryAfter = s.retryAfter
	default: // lockx.ErrNotAcquired: busy for the whole budget
		p = newProblem(problemBusy, http.StatusLocked, "Resource locked",
			"another request holds this resource; retry after the interval in Retry-After", err)
		p.RetryAfter = s.retryAfter
	}
	p.Resource = key
	return p
}

// KeyProblem is the 400 answer to a KeyFunc's error.
func KeyProblem(err error) *Problem {
	return newProblem(problemLockKey, http.StatusBadRequest, "Malformed lock key", err.Error(), err)
}

// Serialize returns middleware that runs the requests of one key — as
// derived by key — one at a time across every process sharing the locks'
// backend. See Serializer.Enter for the answers. The handler's context is
// cancelled if the lock is lost mid-request; it carries the lock, so the
// handler can fence its writes with the lock's token. Serialize panics on a
// nil client or key function, at setup.
func Serialize(locks *lockx.Client, key KeyFunc, opts ...Option) func(http.Handler) http.Handler {
	cfg := newConfig(opts)
	s, err := newSerializer(locks, &cfg)
	if err == nil && key == nil {
		err = errors.New("lockx/middleware: serialize requires a KeyFunc")
	}
	if err != nil {
		panic(err)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if cfg.skipper != nil && cfg.skipper(r) {
				next.ServeHTTP(w, r)
				return
			}
			k, err := key(r)
			if err != nil {
				cfg.errorHandler(w, r, KeyProblem(err))
				return
			}
			ctx, done, err := s.Enter(r.Context(), r.Method, k)
			if err != nil {
				cfg.errorHandler(w, r, err)
				return
			}
			defer done()
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}
