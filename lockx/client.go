package lockx

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
)

// Client hands out locks from one Backend. It owns the backend, the
// watchdog that renews leases and the in-process bookkeeping for reentrancy;
// create one per backend and share it. A Client is safe for concurrent use.
type Client struct {
	b       driver.Backend
	lockOps driver.GrantOps // the plain lock's operations
	// The backend's optional capabilities, looked up once with driver.As
	// (nil where it has none), so a wrapper that forwards them is as good
	// as the backend itself.
	notifier  driver.Notifier
	batch     driver.BatchExtender
	partition driver.ExtendPartitioner
	loss      driver.LossNotifier
	passer    driver.Passer
	manyAcq   driver.ManyAcquirer
	manyRel   driver.ManyReleaser
	cfg       config
	name      string // backend type name, for observed events

	mu      sync.Mutex
	holds   map[holdKey]*hold
	closed  bool
	done    chan struct{} // closed by Close
	wd      watchdog
	exp     expiries // the validity timer of every hold
	gates   gates    // LocalFirst queues, per key
	owners  gates    // serialise backend calls of one explicit owner on one key
	bg      calls    // backend calls left running past a wait budget, and withdrawals
	closing sync.Once
}

type holdKey struct {
	grant bool // a pattern grant: never confused with a plain lock of the same kind name
	kind  string
	key   string
	owner Owner
}

// New returns a Client over b. Options set the defaults of every call; an
// invalid option is reported by every call as an *ArgError.
func New(b driver.Backend, opts ...Option) *Client {
	c := &Client{
		b:     b,
		cfg:   defaultConfig(),
		holds: make(map[holdKey]*hold),
		done:  make(chan struct{}),
	}
	if b == nil {
		c.cfg.fail("backend", "nil")
	}
	c.cfg.apply(opts)
	c.lockOps = lockOps(b)
	driver.As(b, &c.notifier)
	if driver.As(b, &c.batch) {
		driver.As(b, &c.partition)
	}
	driver.As(b, &c.loss)
	driver.As(b, &c.passer)
	driver.As(b, &c.manyAcq)
	driver.As(b, &c.manyRel)
	c.name = backendName(b)
	c.wd.init(c)
	c.gates.init()
	c.owners.init()
	return c
}

// Backend returns the backend the client was created with, so patterns can
// discover its capabilities.
func (c *Client) Backend() driver.Backend { return c.b }

// Acquire obtains the lock for key, waiting until it is granted, ctx ends,
// the wait budget (WithWait) is spent or the client is closed. A refusal
// matches ErrNotAcquired; when ctx ended the error also matches ctx's error.
//
// If ctx carries an owner (ContextWithOwner, or a Lock.Context) that already
// holds key on this client, Acquire re-enters: it returns a new handle with
// the same token at no cost, and the lock is freed when every handle is
// released.
func (c *Client) Acquire(ctx context.Context, key string, opts ...Option) (*Lock, error) {
	return c.acquire(ctx, key, &c.lockOps, opts, true)
}

// TryAcquire makes one attempt to obtain the lock for key. It returns an
// error matching ErrNotAcquired at once if another owner holds it (or, with
// Fair, if others are queued for it).
func (c *Client) TryAcquire(ctx context.Context, key string, opts ...Option) (*Lock, error) {
	return c.acquire(ctx, key, &c.lockOps, opts, false)
}

// Do acquires key (waiting as Acquire does), runs fn and releases the lock.
// fn's context is cancelled when the lock is lost or ctx ends, and carries the
// lock (LockFromContext) for its fencing token; if the lock was lost while fn
// ran, Do's error matches ErrLost (joined with fn's error).
func (c *Client) Do(ctx context.Context, key string, fn func(context.Context) error, opts ...Option) error {
	if fn == nil {
		return keyError("do", key, &ArgError{Arg: "fn", Reason: "nil"})
	}
	l, err := c.Acquire(ctx, key, opts...)
	if err != nil {
		return err
	}
	fctx, cancel := context.WithCancelCause(ContextWithLock(l.Context(), l))
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	ferr := fn(fctx)
	stop()
	cancel(nil)
	return errors.Join(ferr, l.Release(context.WithoutCancel(ctx)))
}

// Close releases every lock still held through this client (best effort,
// bounded), cancels their contexts with cause ErrClosed, stops the watchdog,
// wakes waiting Acquire calls with ErrClosed and closes the backend.
// Close is idempotent.
func (c *Client) Close() error {
	var err error
	c.closing.Do(func() {
		c.mu.Lock()
		c.closed = true
		close(c.done)
		holds := make([]*hold, 0, len(c.holds))
		for k, h := range c.holds {
			holds = append(holds, h)
			delete(c.holds, k)
		}
		c.mu.Unlock()
		c.wd.stop()
		c.exp.stop()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		for _, h := range holds {
			h.finish(ErrClosed)
			h.observeEnd(StatusClosed, "")
			if !h.isLost() {
				_ = h.ops.Release(ctx, h.key, h.owner)
			}
			h.releaseGate()
		}
		c.bg.wait(2 * time.Second)
		if c.b != nil {
			err = c.b.Close()
		}
	})
	return err
}

func (c *Client) validate(key string, cfg *config) error {
	if cfg.err != nil {
		return cfg.err
	}
	switch {
	case key == "":
		return &ArgError{Arg: "key", Reason: "empty"}
	case len(key) > cfg.maxKeyLen:
		return &ArgError{Arg: "key", Reason: fmt.Sprintf("%d bytes, longer than the maximum %d", len(key), cfg.maxKeyLen)}
	}
	return nil
}

// callConfig returns a call's config: the Client's own, as it is, when the
// call has no options (no code but an Option writes a config, so callers
// only read it), else a copy with opts applied. Only the copy is allocated:
// it escapes, as the Options are functions the compiler cannot see into.
func (c *Client) callConfig(opts []Option) *config {
	if len(opts) == 0 {
		return &c.cfg
	}
	own := c.cfg
	own.apply(opts)
	return &own
}
