package mysqllock

import (
	"fmt"
	"github.com/lockx-go/lockx/lockx/driver"
	"time"
)

// Defaults of a Backend's options.
const (
	DefaultTablePrefix      = "lockx_"
	DefaultSessions         = 4
	DefaultHealthInterval   = time.Second
	DefaultPollInterval     = 100 * time.Millisecond
	DefaultStatementTimeout = 5 * time.Second
)

// Option configures a Backend (New or NewTable) and Migrate.
type Option func(*config)

type config struct {
	prefix      string
	sessions    int
	health      time.Duration
	poll        time.Duration
	stmtTimeout time.Duration
	autoMigrate bool
	err         error
}

func newConfig(opts []Option) config {
	c := config{
		prefix:      DefaultTablePrefix,
		sessions:    DefaultSessions,
		health:      DefaultHealthInterval,
		poll:        DefaultPollInterval,
		stmtTimeout: DefaultStatementTimeout,
		autoMigrate: true,
	}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

func (c *config) fail(arg, format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("mysqllock: bad option: %w", &driver.ArgError{Arg: arg, Reason: fmt.Sprintf(format, args...)})
	}
}

// WithTablePrefix sets the prefix of the tables (<prefix>fence,
// <prefix>queue, <prefix>lease) and of the GET_LOCK names.
// It must be 1 to 20 characters of [A-Za-z0-9_]. Default "lockx_".
func WithTablePrefix(p string) Option {
	return func(c *config) {
		if len(p) == 0 || len(p) > 20 {
			c.fail("table prefix", "length %d, want 1..20", len(p))
			return
		}
		for i := 0; i < len(p); i++ {
			ch := p[i]
			if !(ch == '_' || ch >= '0' && ch <= '9' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z') {
				c.fail("table prefix", "%q: only [A-Za-z0-9_] allowed", p)
				return
			}
		}
		c.prefix = p
	}
}

// WithSessions sets how many connections New pins for GET_LOCK (the
// connection budget of a session-mode Backend). Default 4. Ignored by
// NewTable.
func WithSessions(n int) Option {
	return func(c *config) {
		if n < 1 || n > 64 {
			c.fail("sessions", "%d, want 1..64", n)
			return
		}
		c.sessions = n
	}
}

// WithHealthInterval sets how often idle holder sessions are pinged
// (session mode). Default 1 s.
func WithHealthInterval(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail("health interval", "%v, want > 0", d)
			return
		}
		c.health = d
	}
}

// WithPollInterval sets how often a Backend with waiters checks whether
// their keys were freed by another process. Default 100 ms.
func WithPollInterval(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail("poll interval", "%v, want > 0", d)
			return
		}
		c.poll = d
	}
}

// WithStatementTimeout bounds every statement on a holder session. A
// statement that times out closes its session, which frees (and reports
// lost) the locks on it. Default 5 s.
func WithStatementTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail("statement timeout", "%v, want > 0", d)
			return
		}
		c.stmtTimeout = d
	}
}

// WithoutAutoMigrate stops the Backend from creating its tables on first
// use; run Migrate at deploy time instead.
func WithoutAutoMigrate() Option { return func(c *config) { c.autoMigrate = false } }
