package lockx

import (
	"log/slog"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
)

// Defaults. The backoff starts at 50 ms, a few round trips plus a short
// critical section, and doubles with full jitter up to 1 s, which bounds how
// late a waiter that missed a release notification retries (the scheme of
// "Exponential Backoff And Jitter", AWS Architecture Blog, 2015). The lease
// is Redisson's watchdog default.
const (
	DefaultLease      = 30 * time.Second
	DefaultMaxKeyLen  = driver.MaxKeyLen
	DefaultMinBackoff = 50 * time.Millisecond
	DefaultMaxBackoff = time.Second
	DefaultQueueTTL   = 5 * time.Second
)

// Option configures a Client (given to New, it sets the default for every
// call) or a single call (given to Acquire, TryAcquire or Do).
type Option func(*config)

type config struct {
	lease      time.Duration // 0 → DefaultLease with watchdog
	watchdog   bool          // renew at lease/3 until release
	wait       time.Duration // wait budget; 0 → until ctx ends
	fair       bool
	localFirst bool
	queueTTL   time.Duration
	minBackoff time.Duration
	maxBackoff time.Duration
	maxKeyLen  int
	maxKeys    int // AcquireMany's largest set
	driftFrac  float64
	driftFixed time.Duration
	logger     *slog.Logger
	observer   Observer
	signer     *TokenSigner // WithTokenSigning
	err        error        // first invalid option
}

func defaultConfig() config {
	return config{
		lease:      DefaultLease,
		watchdog:   true,
		queueTTL:   DefaultQueueTTL,
		minBackoff: DefaultMinBackoff,
		maxBackoff: DefaultMaxBackoff,
		maxKeyLen:  DefaultMaxKeyLen,
		maxKeys:    DefaultMaxKeys,
		driftFrac:  0.01,
		driftFixed: 2 * time.Millisecond,
	}
}

func (c *config) apply(opts []Option) {
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
}

func (c *config) fail(arg, reason string) {
	if c.err == nil {
		c.err = &ArgError{Arg: arg, Reason: reason}
	}
}

// WithLease sets an explicit lease and turns the watchdog off: the lock
// expires on the backend d after it was granted unless the holder calls
// Extend, and Lost fires when that moment has locally passed. A
// non-positive d is an *ArgError at the call.
func WithLease(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail("lease", "must be positive")
			return
		}
		c.lease, c.watchdog = d, false
	}
}

// WithWatchdog sets the lease the watchdog keeps renewing (at lease/3) until
// release; this is the default mode with DefaultLease. A shorter lease frees
// a crashed holder's lock sooner at the cost of more renewals.
func WithWatchdog(lease time.Duration) Option {
	return func(c *config) {
		if lease <= 0 {
			c.fail("lease", "must be positive")
			return
		}
		c.lease, c.watchdog = lease, true
	}
}

// WithWait sets the wait budget of Acquire: it gives up with ErrNotAcquired
// once d has passed, whatever the backend does — down, hanging or slow, a
// call still in flight is cut off at the budget (and whatever it obtains
// later is released), so Acquire returns within d plus a few milliseconds.
// To keep that promise whatever the backend does, each backend call of the
// wait runs on a goroutine of its own, which a hot key pays for in
// handoffs (about 8 % on Redis; docs/backends.md, "A wait budget costs a
// hop"). A deadline on the context bounds the wait without that cost, as
// tightly as the backend honours it (pglock at once; go-redis only with
// its ContextTimeoutEnabled option, else after its read timeout). Zero (the
// default) waits until the context ends.
func WithWait(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.fail("wait", "must not be negative")
			return
		}
		c.wait = d
	}
}

// Fair grants the lock to waiters in arrival order and wakes only the next
// one. A waiter that stops refreshing its place (crashed) is dropped from the
// queue after the queue TTL (WithQueueTTL).
//
// Some backends queue every waiter whether or not Fair is set: redislock
// hands a released hot key straight to the next waiter in line by default
// (one round trip and one pushed message per handoff, where racing waiters
// took several), and etcdlock's waiters always queue. On those, Fair
// changes nothing; elsewhere it turns racing waiters into a queue. Without
// Fair a waiter that gives up is still withdrawn from any queue the backend
// put it in.
func Fair() Option { return func(c *config) { c.fair = true } }

// WithQueueTTL bounds how long a crashed fair waiter can hold up the queue.
func WithQueueTTL(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail("queue ttl", "must be positive")
			return
		}
		c.queueTTL = d
	}
}

// LocalFirst makes goroutines of this process that contend for one key queue
// in-process first, so only one of them contends with other processes at a
// time: N local waiters cost the backend one waiter instead of N. It cuts
// backend load under local contention.
//
// On a backend that can pass a lock from owner to owner in one step
// (driver.Passer: redislock's single node, Sentinel and Cluster, memlock),
// a hold that ends while another goroutine of this Client waits in line
// for the key hands the lock straight to it, with a new fencing token, in
// one call instead of a release and an acquisition (on Redis one round trip
// and four server commands instead of two and seven). The pass never goes
// ahead of a waiter of another process already queued at the backend (the
// key is released to it instead), and after 16 passes in a row the key is
// released and acquired afresh, so that processes polling for it get a
// chance.
func LocalFirst() Option { return func(c *config) { c.localFirst = true } }

// WithBackoff sets the bounds of the exponential backoff (with jitter)
// between attempts while waiting. With a Notifier backend it is only the
// fallback for a lost notification.
func WithBackoff(min, max time.Duration) Option {
	return func(c *config) {
		if min <= 0 || max < min {
			c.fail("backoff", "need 0 < min <= max")
			return
		}
		c.minBackoff, c.maxBackoff = min, max
	}
}

// WithMaxKeyLen sets the longest key accepted (default 512 bytes).
func WithMaxKeyLen(n int) Option {
	return func(c *config) {
		if n <= 0 {
			c.fail("max key length", "must be positive")
			return
		}
		c.maxKeyLen = n
	}
}

// WithDrift sets the clock-drift allowance: a holder considers its lease
// valid for lease − elapsed − (lease·factor + fixed). The default is
// 0.01 and 2 ms.
func WithDrift(factor float64, fixed time.Duration) Option {
	return func(c *config) {
		if factor < 0 || factor >= 0.5 || fixed < 0 {
			c.fail("drift", "need 0 <= factor < 0.5 and fixed >= 0")
			return
		}
		c.driftFrac, c.driftFixed = factor, fixed
	}
}

// WithLogger sets the logger for events worth an operator's attention (lost
// locks, failed renewals). lockx is silent by default.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }
