// Package breaker puts a circuit breaker (github.com/sony/gobreaker/v2) in
// front of a lockx backend, so that when the backend fails, callers fail
// fast with lockx.ErrUnavailable instead of each waiting for its own
// timeout:
//
//	locks := lockx.New(breaker.Wrap(redislock.New(rdb)))
//
// After Failures consecutive backend failures (transport errors, timeouts:
// errors matching lockx.ErrUnavailable) the breaker opens. While it is open
// every call is refused at once with an error matching lockx.ErrUnavailable,
// ErrCircuitOpen and driver.ErrNoRetry, and Client.Acquire gives up at once
// instead of waiting. After OpenTimeout it lets HalfOpenProbes calls
// through; if they succeed it closes, otherwise it opens again.
//
// Verdicts are answers, not failures: a refusal, lockx.ErrNotHeld, a stale
// fencing token, an *lockx.ArgError or driver.ErrNoResult count as successes
// of the backend. A call whose own context ended is not counted at all.
//
// The breaker fails closed. It never answers for the backend: an open
// breaker refuses acquisitions, and refuses renewals too, so the watchdog
// cannot renew a lease and the lock is reported lost when its local
// validity ends — exactly as if the backend were down, because as far as
// anyone can know it is.
//
// A wrapped backend keeps the optional capabilities of the backend it wraps
// (every capability of package driver), each going through the same
// breaker: the Breaker answers driver.As with an adapter per capability,
// so the Client and the patterns find them as on the bare backend. It has
// no Unwrap, so nothing can reach the wrapped backend around the breaker.
package breaker

import (
	"context"
	"errors"
	"fmt"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/sony/gobreaker/v2"
	"log/slog"
	"time"
)

// Defaults.
const (
	DefaultFailures       = 5
	DefaultOpenTimeout    = 5 * time.Second
	DefaultHalfOpenProbes = 1
	DefaultInterval       = 10 * time.Second
	DefaultWatchTimeout   = time.Second
)

// Option configures a breaker.
type Option func(*config)

type config struct {
	name     string
	failures uint32
	open     time.Duration
	probes   uint32
	interval time.Duration
	watch    time.Duration
	onChange func(name, from, to string)
	logger   *slog.Logger
}

// WithName names the breaker in state-change callbacks and metrics
// (default: the backend's Go type).
func WithName(name string) Option { return func(c *config) { c.name = name } }

// WithFailures sets how many consecutive failures open the breaker
// (default 5). n = 0 keeps the default.
func WithFailures(n uint32) Option {
	return func(c *config) {
		if n > 0 {
			c.failures = n
		}
	}
}

// WithOpenTimeout sets how long the breaker stays open before it lets
// probes through (default 5 s). It bounds how long after the backend is
// back callers keep being refused.
func WithOpenTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.open = d
		}
	}
}

// WithHalfOpenProbes sets how many calls may probe a half-open breaker at
// once (default 1); the others are refused as if it were open.
func WithHalfOpenProbes(n uint32) Option {
	return func(c *config) {
		if n > 0 {
			c.probes = n
		}
	}
}

// WithInterval sets the period after which a closed breaker forgets its
// failure counts (default 10 s).
func WithInterval(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.interval = d
		}
	}
}

// WithWatchTimeout bounds how long a Notifier's Watch may wait for its
// subscription (default 1 s). A Watch that runs out of it while its caller's
// context is still live counts as a failure: a backend that cannot
// subscribe is down, and the caller falls back to polling anyway.
func WithWatchTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.watch = d
		}
	}
}

// OnStateChange calls f on every state change with the breaker's name and
// the states "closed", "half-open" or "open". lockxotel's
// Observer.BreakerStateChanged fits. f runs synchronously inside a backend
// call: keep it short.
func OnStateChange(f func(name, from, to string)) Option {
	return func(c *config) { c.onChange = f }
}

// WithLogger logs every state change (at Warn when the breaker opens, Info
// otherwise). The breaker is silent by default.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// Breaker is the driver.Backend that Wrap returns. Its capabilities are
// found with driver.As (see As); reach it behind other wrappers with Of.
type Breaker struct {
	b    driver.Backend
	cb   *gobreaker.TwoStepCircuitBreaker[struct{}]
	name string
	// watchTimeout bounds Watch; see WithWatchTimeout.
	watchTimeout time.Duration
}

// errExcluded marks a call whose own context ended: not the backend's fault.
var errExcluded = errors.New("breaker: caller's context ended")

// Wrap returns b behind a circuit breaker. driver.As finds on the result
// every capability of b, gated by the breaker. Close closes b.
func Wrap(b driver.Backend, opts ...Option) driver.Backend {
	cfg := config{failures: DefaultFailures, open: DefaultOpenTimeout, probes: DefaultHalfOpenProbes, interval: DefaultInterval, watch: DefaultWatchTimeout}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.name == "" {
		cfg.name = fmt.Sprintf("%T", b)
	}
	br := &Breaker{b: b, name: cfg.name, watchTimeout: cfg.watch}
	st := gobreaker.Settings{
		Name:        cfg.name,
		MaxRequests: cfg.probes,
		Interval:    cfg.interval,
		Timeout:     cfg.open,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= cfg.failures },
		IsSuccessful: func(err error) bool {
			return err == nil || !errors.Is(err, driver.ErrUnavailable)
		},
		IsExcluded: func(err error) bool { return errors.Is(err, errExcluded) },
	}
	if f, l := cfg.onChange, cfg.logger; f != nil || l != nil {
		st.OnStateChange = func(name string, from, to gobreaker.State) {
			if l != nil {
				level := slog.LevelInfo
				if to == gobreaker.StateOpen {
					level = slog.LevelWarn
				}
				l.Log(context.Background(), level, "lockx: circuit breaker state change", "breaker", name, "from", from.String(), "to", to.String())
			}
			if f != nil {
				f(name, from.String(), to.String())
			}
		}
	}
	br.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](st)
	return br
}

// Of returns the Breaker of a backend made by Wrap, found with driver.As
// through any wrappers around it.
func Of(b driver.Backend) (*Breaker, bool) {
	var br *Breaker
	ok := driver.As(b, &br)
	return br, ok
}

// State returns "closed", "half-open" or "open".
func (br *Breaker) State() string { return br.cb.State().String() }

// Name returns the breaker's name.
func (br *Breaker) Name() string { return br.name }

// Wrapped returns the wrapped backend. It is not called Unwrap on purpose:
// driver.As walks Unwrap, and would then find the wrapped backend's
// capabilities ungated.
func (br *Breaker) Wrapped() driver.Backend { return br.b }

// BackendName names the wrapped backend in lockx's observed events, so
// metrics keep their labels whether or not a breaker is in front.
func (br *Breaker) BackendName() string {
	if n, ok := br.b.(interface{ BackendName() string }); ok {
		return n.BackendName()
	}
	return fmt.Sprintf("%T", br.b)
}

// ErrCircuitOpen reports a call that the breaker refused without reaching
// the backend, because the backend has been failing. It always comes in an
// error that also matches lockx.ErrUnavailable and driver.ErrNoRetry, the
// latter telling Client.Acquire to give up at once instead of waiting.
var ErrCircuitOpen = errors.New("breaker: circuit breaker open")

// openError is the refusal of an open (or saturated half-open) breaker.
type openError struct {
	op, name string
	err      error
}

func (e *openError) Error() string {
	return "lockx: backend unavailable: " + e.op + ": circuit breaker " + e.name + " open"
}

func (e *openError) Unwrap() []error {
	return []error{driver.ErrUnavailable, ErrCircuitOpen, driver.ErrNoRetry, e.err}
}

// allow asks the breaker for a call; done reports its error.
func (br *Breaker) allow(op string) (done func(ctx context.Context, err error), err error) {
	d, err := br.cb.Allow()
	if err != nil {
		return nil, &openError{op: op, name: br.name, err: err}
	}
	return func(ctx context.Context, err error) {
		if err != nil && ctx.Err() != nil {
			err = errExcluded // the caller gave up: says nothing about the backend
		}
		d(err)
	}, nil
}

// call runs fn through the breaker.
func (br *Breaker) call(ctx context.Context, op string, fn func() error) error {
	done, err := br.allow(op)
	if err != nil {
		return err
	}
	err = fn()
	done(ctx, err)
	return err
}

// Acquire implements driver.Backend.
func (br *Breaker) Acquire(ctx context.Context, req driver.Request) (driver.Result, error) {
	return br.grant(ctx, "acquire", func() (driver.Result, error) { return br.b.Acquire(ctx, req) })
}

// grant runs fn, a call that answers with a grant, through the breaker.
func (br *Breaker) grant(ctx context.Context, op string, fn func() (driver.Result, error)) (res driver.Result, err error) {
	err = br.call(ctx, op, func() error {
		res, err = fn()
		return err
	})
	if err != nil {
		return driver.Result{}, err
	}
	return res, nil
}

// Extend implements driver.Backend.
func (br *Breaker) Extend(ctx context.Context, key string, owner driver.Owner, lease time.Duration) error {
	return br.call(ctx, "extend", func() error { return br.b.Extend(ctx, key, owner, lease) })
}

// Release implements driver.Backend.
func (br *Breaker) Release(ctx context.Context, key string, owner driver.Owner) error {
	return br.call(ctx, "release", func() error { return br.b.Release(ctx, key, owner) })
}

// TTL implements driver.Backend.
func (br *Breaker) TTL(ctx context.Context, key string, owner driver.Owner) (d time.Duration, err error) {
	err = br.call(ctx, "ttl", func() error {
		d, err = br.b.TTL(ctx, key, owner)
		return err
	})
	return d, err
}

// Close implements driver.Backend: it closes the wrapped backend.
func (br *Breaker) Close() error { return br.b.Close() }
