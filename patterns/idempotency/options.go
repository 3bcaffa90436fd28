package idempotency

import (
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// Defaults of a Guard.
const (
	// DefaultRetention is how long an outcome is kept and replayed: Stripe's
	// 24 hours. A key used again after it behaves like a new key.
	DefaultRetention = 24 * time.Hour
	// DefaultPrefix starts the lock key and the record key of every call,
	// so that idempotency keys cannot collide with other locks.
	DefaultPrefix = "idem:"
)

// Option configures a Guard.
type Option func(*config)

type config struct {
	store     driver.ResultStore
	retention time.Duration
	wait      time.Duration
	retryable func(error) bool
	lockOpts  []lockx.Option
	prefix    string
	sentinels []error
	err       error
}

func defaultConfig() config {
	return config{retention: DefaultRetention, retryable: Retryable, prefix: DefaultPrefix}
}

func (c *config) fail(arg, reason string) {
	if c.err == nil {
		c.err = &lockx.ArgError{Arg: arg, Reason: reason}
	}
}

// WithStore sets where outcomes are kept. Without it the Guard uses the
// client's backend if it implements driver.ResultStore (memlock, redislock and
// pglock do). Keeping outcomes in a different system than the locks is
// allowed, for instance locks in Redis and outcomes in PostgreSQL.
func WithStore(s driver.ResultStore) Option {
	return func(c *config) {
		if s == nil {
			c.fail("store", "nil")
			return
		}
		c.store = s
	}
}

// WithRetention sets how long outcomes are kept (default 24 h). Publish it
// to your clients: a retry after it runs the work again.
func WithRetention(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail("retention", "must be positive")
			return
		}
		c.retention = d
	}
}

// WithWait makes a call whose key is in use by a running call wait up to d
// for it to finish and then return its outcome, instead of failing with
// lockx.ErrInProgress at once (the default, d = 0). The wait ends early with
// the caller's context.
func WithWait(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.fail("wait", "must not be negative")
			return
		}
		c.wait = d
	}
}

// WithRetryable sets the predicate that decides which errors of fn are
// retryable: those are returned but not stored, so the next call runs fn
// again. Every other error is terminal: stored and replayed. Errors marked
// with Retry are retryable whatever the predicate says. The default is
// Retryable.
func WithRetryable(pred func(error) bool) Option {
	return func(c *config) {
		if pred == nil {
			c.fail("retryable", "nil predicate")
			return
		}
		c.retryable = pred
	}
}

// WithLockOptions sets the options of the lock held while fn runs, for
// instance lockx.WithWatchdog(5*time.Second) so that a crashed process's key
// becomes free after 5 s instead of the default 30 s.
func WithLockOptions(opts ...lockx.Option) Option {
	return func(c *config) { c.lockOpts = append(c.lockOpts, opts...) }
}

// WithPrefix sets the prefix of lock and record keys (default "idem:").
// Guards that must see each other's outcomes need the same prefix.
func WithPrefix(p string) Option { return func(c *config) { c.prefix = p } }

// WithErrors registers sentinel errors that a replayed terminal error should
// still match: a stored error that matched sentinel s when it was stored is
// replayed as a *lockx.StoredError wrapping s, so errors.Is(err, s) holds in
// every process that registered s. Sentinels are told apart by their text.
func WithErrors(sentinels ...error) Option {
	return func(c *config) {
		for _, s := range sentinels {
			if s == nil {
				c.fail("errors", "nil sentinel")
				return
			}
		}
		c.sentinels = append(c.sentinels, sentinels...)
	}
}
