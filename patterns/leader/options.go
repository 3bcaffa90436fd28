package leader

import (
	"fmt"
	"os"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/lockx-go/lockx/lockx"
)

// Defaults.
const (
	// DefaultLease is the lease of a leader's lock: a leader that dies is
	// replaced at most this long after its last renewal. The watchdog
	// renews the lease every third of it.
	DefaultLease = 10 * time.Second
	// DefaultPollInterval is how often Observe reads the leader.
	DefaultPollInterval = 100 * time.Millisecond
	// MaxIdentityLen is the longest identity, in bytes. The identity
	// travels inside the lock's owner id, beside 128 random bits, and the
	// whole must fit the narrowest owner column of the backends (64 bytes).
	MaxIdentityLen = 40
)

// Option configures an Election.
type Option func(*config)

type config struct {
	identity string
	lease    time.Duration
	poll     time.Duration
	lockOpts []lockx.Option
	err      error
}

func (c *config) fail(arg, reason string) {
	if c.err == nil {
		c.err = &lockx.ArgError{Arg: arg, Reason: reason}
	}
}

// WithIdentity sets the name this instance is known by while it leads:
// what Leader and Observe report and the HTTP middleware forwards to. It
// must be 1 to MaxIdentityLen bytes of printable UTF-8. The default is
// DefaultIdentity().
func WithIdentity(id string) Option {
	return func(c *config) {
		if err := checkIdentity(id); err != nil {
			c.fail("identity", err.Error())
			return
		}
		c.identity = id
	}
}

// WithLease sets the lease of the leader's lock (default DefaultLease): how
// long a leader that stops renewing (crashed, paused, cut off) keeps the
// office before another candidate can take it. Zero keeps the default; a
// negative lease is an *lockx.ArgError.
func WithLease(d time.Duration) Option {
	return func(c *config) {
		switch {
		case d < 0:
			c.fail("lease", "negative")
		case d > 0:
			c.lease = d
		}
	}
}

// WithPollInterval sets how often Observe reads the leader (default
// DefaultPollInterval). A term shorter than the interval may be missed.
func WithPollInterval(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail("poll interval", "must be positive")
			return
		}
		c.poll = d
	}
}

// WithLockOptions adds options to the leader's lock acquisition (for
// example lockx.WithObserver, or lockx.WithDrift for the local validity
// margin). The lease is set by WithLease.
func WithLockOptions(opts ...lockx.Option) Option {
	return func(c *config) { c.lockOpts = append(c.lockOpts, opts...) }
}

// DefaultIdentity returns "host:pid", with the host name cut so that the
// whole fits MaxIdentityLen.
func DefaultIdentity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	pid := fmt.Sprintf(":%d", os.Getpid())
	if len(host)+len(pid) > MaxIdentityLen {
		host = host[:MaxIdentityLen-len(pid)]
	}
	id := host + pid
	if checkIdentity(id) != nil {
		return "localhost" + pid
	}
	return id
}

func checkIdentity(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("empty")
	case len(id) > MaxIdentityLen:
		return fmt.Errorf("%d bytes, longer than the maximum %d", len(id), MaxIdentityLen)
	case !utf8.ValidString(id):
		return fmt.Errorf("not valid UTF-8")
	}
	for _, r := range id {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("contains the unprintable %U", r)
		}
	}
	return nil
}
