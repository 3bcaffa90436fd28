package pglock

import (
	"fmt"
	"github.com/lockx-go/lockx/lockx/driver"
	"log/slog"
	"time"
)

// Defaults of a Backend's options.
const (
	DefaultSchema           = "lockx"
	DefaultNamespace        = "lockx"
	DefaultSessions         = 2
	DefaultWaitSessions     = 1
	DefaultHealthInterval   = time.Second
	DefaultStatementTimeout = 5 * time.Second
	DefaultConnectTimeout   = 3 * time.Second
	DefaultPublishDelay     = 5 * time.Millisecond
)

// Option configures a Backend (New) or a TxLock call.
type Option func(*config)

type config struct {
	schema         string
	namespace      string
	sessions       int
	waitSessions   int
	poolWait       int // wait sessions taken from the pool (New); the rest are dedicated
	waitSlice      time.Duration
	health         time.Duration
	stmtTimeout    time.Duration
	connectTimeout time.Duration
	publishDelay   time.Duration
	autoMigrate    bool
	logger         *slog.Logger
	secret         []byte                            // WithKeySecret
	idHook         func(namespace, key string) int64 // tests: force advisory-lock ids
	err            error                             // first invalid option
}

func defaultConfig() config {
	return config{
		schema:         DefaultSchema,
		namespace:      DefaultNamespace,
		sessions:       DefaultSessions,
		waitSessions:   DefaultWaitSessions,
		waitSlice:      defaultWaitSlice,
		health:         DefaultHealthInterval,
		stmtTimeout:    DefaultStatementTimeout,
		connectTimeout: DefaultConnectTimeout,
		publishDelay:   DefaultPublishDelay,
		autoMigrate:    true,
	}
}

func newConfig(opts []Option) config {
	c := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

func (c *config) fail(arg, format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("pglock: bad option: %w", &driver.ArgError{Arg: arg, Reason: fmt.Sprintf(format, args...)})
	}
}

// WithSchema sets the schema that holds the fence sequence and the lock and
// queue tables (default "lockx"). Every Backend, TxLock and Migrate that
// share locks must use the same schema.
func WithSchema(name string) Option {
	return func(c *config) {
		if name == "" || len(name) > 63 {
			c.fail("schema", "need 1 to 63 bytes, got %d", len(name))
			return
		}
		c.schema = name
	}
}

// WithNamespace sets the string mixed into every key's 64-bit advisory-lock
// hash (default "lockx"). Processes that must exclude each other use the same
// namespace; a different namespace keeps two applications that share a
// database out of each other's way.
func WithNamespace(ns string) Option { return func(c *config) { c.namespace = ns } }

// WithSessions sets how many pinned holder sessions (pool connections) carry
// the Backend's advisory locks (default 2, never more than half the pool's
// MaxConns). Locks are spread over them by key hash. Each session pipelines
// the statements of all concurrent callers and merges their grants and
// releases into one statement each per round trip, so a few suffice: the
// fewer the sessions, the larger the batches. Measured on a 2-core server
// (32 goroutines on distinct keys, server CPU per acquire + release pair):
// 13–15 µs with 1 session, 22–25 µs with 2, 31–34 µs with 4, 48 µs with 8,
// with no gain in pairs per second past 2. More sessions shrink the blast
// radius of one dying; on a server with more cores they can add capacity.
func WithSessions(n int) Option {
	return func(c *config) {
		if n < 1 || n > 64 {
			c.fail("sessions", "need 1 to 64, got %d", n)
			return
		}
		c.sessions = n
	}
}

// WithWaitSessions sets how many wait sessions a Backend may keep for
// waiters that queue in PostgreSQL's own lock queue (default 1, 0 to never
// queue there). They are pool connections while they fit in half the
// pool's MaxConns beside the holder sessions, and otherwise dedicated
// connections the Backend opens with the pool's config (see New): the
// budget is kept whatever the pool's size. A plain Acquire that was refused once and waits blocks
// in pg_advisory_lock on a free wait session, so the release hands the lock
// over inside the server, in order, without a NOTIFY and a competing
// re-attempt. A wait session serves one waiter at a time and then holds its
// grant until it is released; further waiters of the process wait by
// LISTEN/NOTIFY as before, so the connection budget stays fixed.
func WithWaitSessions(n int) Option {
	return func(c *config) {
		if n < 0 || n > 64 {
			c.fail("wait sessions", "need 0 to 64, got %d", n)
			return
		}
		c.waitSessions = n
	}
}

// WithHealthInterval sets how often an idle holder session is pinged
// (default 1 s); each ping also times out after d. A session that died —
// pg_terminate_backend, a server restart, a network cut — is noticed within
// about d (2d for a silent network cut) and all locks on it are reported
// lost.
func WithHealthInterval(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail("health interval", "must be positive")
			return
		}
		c.health = d
	}
}

// WithStatementTimeout bounds every statement the Backend runs on its own
// sessions (default 5 s). Statements on holder sessions never run under the
// caller's context — pgx closes a connection whose context is cancelled
// mid-statement, which would free every lock on it — so this timeout is what
// bounds them. A statement that times out kills its session.
func WithStatementTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail("statement timeout", "must be positive")
			return
		}
		c.stmtTimeout = d
	}
}

// WithConnectTimeout bounds how long the Backend waits for a pool connection
// for a holder or listener session (default 3 s), so a server that is down
// yields driver.ErrUnavailable quickly.
func WithConnectTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail("connect timeout", "must be positive")
			return
		}
		c.connectTimeout = d
	}
}

// WithPublishDelay sets how long a plain exclusive hold may last before its
// holder's row in lockx_held is written (default 5 ms; 0 writes it in the
// grant statement itself).
//
// The row is what lets another process see and check the holder: Release,
// Extend and TTL by owner through another Backend, force-release, Inspect
// and a refusal's remaining lease. Writing it costs more server time than
// the advisory lock and the fencing token together, and on a hot key, where
// every hold is short, that write is most of a handoff. With a delay, a hold
// released within it never writes a row; a longer one writes it when the
// delay has passed (or at its first Extend), with the lease it has left.
//
// What the delay changes for other processes: for its first d, a hold is
// not listed by Inspect, and a refusal reports no remaining lease (the
// waiter waits as for any refusal). An owner check by another Backend that
// finds no row while the key is held by a hold without one looks again
// until a hold younger than d would have been published (about 2d + 20 ms),
// so it still succeeds for the true owner, and for any other owner answers
// ErrNotHeld that much later; a key that is free or held by a published
// hold is answered at once (a waiter withdrawing pays nothing).
// The reader looks again for as long as its own delay says, so processes
// that share locks should use one delay, as they use one namespace.
// The lock itself, its fencing token, its lease and loss detection are the
// same either way. Fair() holds write their row at once (their grant
// statement touches the fair queue anyway).
func WithPublishDelay(d time.Duration) Option {
	return func(c *config) {
		if d < 0 || d > time.Second {
			c.fail("publish delay", "need 0 to 1s, got %v", d)
			return
		}
		c.publishDelay = d
	}
}

// WithoutAutoMigrate stops the Backend from creating its schema on first
// use; run Migrate (for example as a privileged role at deploy time) instead.
func WithoutAutoMigrate() Option { return func(c *config) { c.autoMigrate = false } }

// WithLogger sets the logger for events an operator should see (a holder
// session lost, a listener reconnect). The Backend is silent by default.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }
