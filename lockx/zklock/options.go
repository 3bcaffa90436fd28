package zklock

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/lockx-go/lockx/lockx/driver"
)

// Defaults.
const (
	// DefaultRoot is the znode under which every lock lives.
	DefaultRoot = "/lockx"
	// DefaultSessionTimeout is the session timeout asked of the server. The
	// server clamps it to [2, 20] × its tickTime (4 s to 40 s by default);
	// the Backend uses the negotiated value.
	DefaultSessionTimeout = 10 * time.Second
	// DefaultConnectTimeout bounds Dial's wait for the first session.
	DefaultConnectTimeout = 10 * time.Second
)

// Option configures a Backend.
type Option func(*config) error

type config struct {
	root           string
	sessionTimeout time.Duration
	connectTimeout time.Duration
	acl            []zk.ACL
	logger         *slog.Logger
	connOpts       []func(*zk.Conn)
}

func defaults() config {
	return config{
		root:           DefaultRoot,
		sessionTimeout: DefaultSessionTimeout,
		connectTimeout: DefaultConnectTimeout,
		acl:            zk.WorldACL(zk.PermAll),
	}
}

// WithRoot sets the znode under which locks live (default "/lockx"). It
// must be an absolute path without a trailing slash; missing parents are
// created as persistent znodes.
func WithRoot(path string) Option {
	return func(c *config) error {
		if !strings.HasPrefix(path, "/") || (len(path) > 1 && strings.HasSuffix(path, "/")) || strings.Contains(path, "//") || path == "/" {
			return &driver.ArgError{Arg: "root", Reason: fmt.Sprintf("%q is not an absolute znode path like /lockx", path)}
		}
		c.root = path
		return nil
	}
}

// WithSessionTimeout sets the ZooKeeper session timeout asked for (default
// 10 s). It is how long a crashed or cut-off process keeps its locks, and it
// bounds how long a disconnected Backend trusts its locks (a quarter of it,
// see the package documentation).
func WithSessionTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d < 100*time.Millisecond {
			return &driver.ArgError{Arg: "session timeout", Reason: "must be at least 100ms"}
		}
		c.sessionTimeout = d
		return nil
	}
}

// WithConnectTimeout bounds how long Dial waits for the first session
// (default 10 s).
func WithConnectTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return &driver.ArgError{Arg: "connect timeout", Reason: "must be positive"}
		}
		c.connectTimeout = d
		return nil
	}
}

// WithACL sets the ACL of the znodes the Backend creates (default: world,
// all permissions). Use zk.DigestACL with WithConnOptions(zk.WithDialer…)
// or AddAuth on a shared ensemble.
func WithACL(acl []zk.ACL) Option {
	return func(c *config) error {
		if len(acl) == 0 {
			return &driver.ArgError{Arg: "acl", Reason: "must not be empty"}
		}
		c.acl = acl
		return nil
	}
}

// WithLogger makes the Backend log connection state changes and the
// go-zookeeper client's messages at Debug level (and lock losses at Warn)
// through l. Without it the Backend is silent.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) error {
		c.logger = l
		return nil
	}
}

// WithConnOptions passes options to zk.Connect, such as zk.WithDialer (TLS,
// a proxy) or zk.WithMaxBufferSize. The Backend's own logger and event
// callback are applied after them and cannot be replaced.
func WithConnOptions(opts ...func(*zk.Conn)) Option {
	return func(c *config) error {
		c.connOpts = append(c.connOpts, opts...)
		return nil
	}
}
