package etcdlock

import (
	"strings"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// DefaultPrefix starts every key the backend writes.
const DefaultPrefix = "lockx/"

// Option configures a Backend.
type Option func(*config)

type config struct {
	prefix    string
	queueTTL  time.Duration
	opTimeout time.Duration
	lossDelay time.Duration
	err       error // first invalid option
}

func defaultConfig() config {
	return config{prefix: DefaultPrefix, queueTTL: lockx.DefaultQueueTTL, opTimeout: 5 * time.Second, lossDelay: 100 * time.Millisecond}
}

func (c *config) fail(arg, reason string) {
	if c.err == nil {
		c.err = &driver.ArgError{Arg: arg, Reason: reason}
	}
}

// positive sets *field to d, or records an *driver.ArgError if d ≤ 0.
func (c *config) positive(arg string, d time.Duration, field *time.Duration) {
	if d <= 0 {
		c.fail(arg, "must be positive")
		return
	}
	*field = d
}

// WithPrefix sets the prefix of every key the backend writes (default
// "lockx/"). Backends that share locks must share the prefix. It must be
// non-empty; a prefix that is a prefix of another backend's (say "a" and
// "ab") is allowed but unwise. An invalid prefix is reported as an
// *driver.ArgError by every call.
func WithPrefix(prefix string) Option {
	return func(c *config) {
		if prefix == "" || strings.ContainsRune(prefix, 0) {
			c.fail("etcdlock prefix", "must be non-empty and contain no NUL byte")
			return
		}
		c.prefix = prefix
	}
}

// WithQueueTTL sets how long a queue entry lives without a refresh when a
// request does not say (Request.QueueTTL zero). Default
// lockx.DefaultQueueTTL. etcd leases count whole seconds, so the entry lives
// for the duration rounded up to a second, and at least the cluster's
// minimum lease TTL.
func WithQueueTTL(d time.Duration) Option {
	return func(c *config) {
		c.positive("etcdlock queue TTL", d, &c.queueTTL)
	}
}

// WithOpTimeout bounds every etcd call the backend makes on its own, outside
// a caller's context: background lease revocations and the checks of the
// loss watch (default 5 s).
func WithOpTimeout(d time.Duration) Option {
	return func(c *config) {
		c.positive("etcdlock op timeout", d, &c.opTimeout)
	}
}

// WithLossWatchDelay sets how long a lock must have been held before
// NotifyLoss opens an etcd watch on it (default 100 ms). The watch starts at
// the grant's revision, so it misses nothing that happened in between; the
// delay only spares short holds the cost of a watch.
func WithLossWatchDelay(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.fail("etcdlock loss watch delay", "must not be negative")
			return
		}
		c.lossDelay = d
	}
}
