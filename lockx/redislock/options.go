package redislock

import (
	"strings"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// Defaults of a Backend.
const (
	// DefaultPrefix starts every key the backend writes.
	DefaultPrefix = "lockx:"
	// DefaultTombstone is how long a released key keeps its last fencing
	// token, so that the next grant issues a larger one even if the server
	// clock has not moved past it (see the package documentation).
	DefaultTombstone = 2 * time.Second
)

// Option configures a Backend.
type Option func(*config)

type config struct {
	prefix       string
	tombstone    time.Duration
	queueTTL     time.Duration
	replicas     int
	ackTimeout   time.Duration
	autoPipeline bool
	// racing: a waiter without Fair does not queue, it marks the key and
	// races for it when woken (a Quorum's nodes: each node's queue would
	// hand the key to its own head, and the heads of different nodes may
	// differ, so no one would hold a majority).
	racing bool
	// clockTokens: every grant reads the server clock, and its token is
	// the larger of the clock and one past the key's previous token; and
	// a grant looks for a fair queue even over a tombstone. For a Quorum's
	// nodes: a quorum compares the tokens of different nodes, which only
	// their clocks keep in step, and its yield leaves a tombstone while
	// the queue lives. Otherwise a grant over a tombstone is one past it,
	// without reading the clock or looking for a queue (acquire.lua).
	clockTokens bool
	err         error // first invalid option
}

func defaultConfig() config {
	return config{prefix: DefaultPrefix, tombstone: DefaultTombstone, queueTTL: lockx.DefaultQueueTTL, autoPipeline: true}
}

func (c *config) fail(arg, reason string) {
	if c.err == nil {
		c.err = &driver.ArgError{Arg: arg, Reason: reason}
	}
}

// WithPrefix sets the prefix of every key and pub/sub channel the backend
// uses (default "lockx:"). Backends that share locks must share the prefix.
// The prefix must not contain braces: the lock key itself is the hash tag
// that keeps all keys of one lock on one Cluster node. An invalid prefix is
// reported as an *driver.ArgError by every call.
func WithPrefix(prefix string) Option {
	return func(c *config) {
		if strings.ContainsAny(prefix, "{}") {
			c.fail("redislock prefix", "must not contain '{' or '}'")
			return
		}
		c.prefix = prefix
	}
}

// WithTombstone sets how long a released key keeps its last fencing token
// (default 2 s). Tokens stay monotonic across a release as long as the
// server clock does not step back by more than this while the key is free;
// zero keeps nothing and relies on the clock alone.
func WithTombstone(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.fail("redislock tombstone", "must not be negative")
			return
		}
		c.tombstone = d
	}
}

// WithQueueTTL sets the fair-queue entry lifetime used when a request does
// not carry one (default lockx.DefaultQueueTTL): a waiter that stops
// refreshing its place is dropped after it.
func WithQueueTTL(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail("redislock queue ttl", "must be positive")
			return
		}
		c.queueTTL = d
	}
}

// WithReplicaAck makes every grant wait until at least replicas replicas
// have acknowledged it (Redis WAIT, sent in the same pipeline as the grant),
// for at most timeout. A grant that is not acknowledged in time is released
// again and the attempt fails with an error matching driver.ErrUnavailable,
// so a lock is never handed out that a failover to a lagging replica could
// forget. It costs one replication round trip per grant.
//
// WAIT needs the grant and itself on one connection: pass a *redis.Client,
// a failover client or a *redis.ClusterClient, not an autopipeliner. The
// pipeline is read with the client's ReadTimeout, so keep timeout below it.
func WithReplicaAck(replicas int, timeout time.Duration) Option {
	return func(c *config) {
		if replicas < 0 || (replicas > 0 && timeout <= 0) {
			c.fail("redislock replica ack", "need replicas >= 0 and a positive timeout")
			return
		}
		c.replicas, c.ackTimeout = replicas, timeout
	}
}

// racingWaiters makes waiters without Fair race for a released key instead
// of queueing (see config.racing).
func racingWaiters() Option { return func(c *config) { c.racing = true } }

// clockTokens makes every grant's token follow the server clock, and every
// grant look for a fair queue (see config.clockTokens).
func clockTokens() Option { return func(c *config) { c.clockTokens = true } }

// WithAutoPipeline turns the batching of concurrent calls on or off
// (default on). On, a call goes straight to the client, alone, while fewer
// than eight calls or pipelines of the backend are on the wire (per node),
// so with few callers nothing waits to be batched; beyond that the calls of
// the goroutines under way at once queue and go out together as one
// pipeline of the client (through its hooks) when a flight comes back, with
// the same replies, far fewer system calls on both ends and a much higher
// throughput. Off, every call is its own round trip on a pooled connection.
func WithAutoPipeline(on bool) Option { return func(c *config) { c.autoPipeline = on } }
