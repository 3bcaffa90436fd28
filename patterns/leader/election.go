package leader

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/lockx-go/lockx/lockx"
)

// ErrResigned is the cause of a Term's context after Resign.
var ErrResigned = errors.New("leader: resigned")

// ErrNoLeader is returned by Leader when nobody leads.
var ErrNoLeader = errors.New("leader: no leader")

// keyPrefix keeps an election's lock apart from a plain lock of the same
// name on the same backend.
const keyPrefix = "leader:"

// Election is one named office that instances sharing a backend compete
// for. Create it with New; it is safe for concurrent use, and one Election
// may campaign several times at once (each Campaign is a separate
// candidate).
type Election struct {
	c    *lockx.Client
	name string
	key  string
	cfg  config
}

// New returns the election name on c. A nil client, an empty name or an
// invalid option is reported as an error matching lockx.ErrInvalidArgument
// (an *lockx.ArgError).
func New(c *lockx.Client, name string, opts ...Option) (*Election, error) {
	cfg := config{lease: DefaultLease, poll: DefaultPollInterval}
	for _, o := range opts {
		if o == nil {
			cfg.fail("option", "nil")
			continue
		}
		o(&cfg)
	}
	switch {
	case c == nil:
		return nil, fmt.Errorf("leader: %w", &lockx.ArgError{Arg: "client", Reason: "nil"})
	case name == "":
		return nil, fmt.Errorf("leader: %w", &lockx.ArgError{Arg: "name", Reason: "empty"})
	case cfg.err != nil:
		return nil, fmt.Errorf("leader: %w", cfg.err)
	}
	if cfg.identity == "" {
		cfg.identity = DefaultIdentity()
	}
	return &Election{c: c, name: name, key: keyPrefix + name, cfg: cfg}, nil
}

// Name returns the election's name.
func (e *Election) Name() string { return e.name }

// Key returns the key of the election's lock: "leader:" + name. Operators
// can inspect or evict the leader by it (lockx.ForceUnlock).
func (e *Election) Key() string { return e.key }

// Identity returns the identity this instance campaigns under.
func (e *Election) Identity() string { return e.cfg.identity }

// Lease returns the lease of the leader's lock.
func (e *Election) Lease() time.Duration { return e.cfg.lease }

// Campaign blocks until this instance leads, ctx ends or the client is
// closed, and returns the term it leads. Candidates are served in order of
// arrival where the backend queues fairly (lockx.Fair); a leader that
// resigns or dies wakes the next one by the backend's notification.
//
// The term's token comes from the lock's grant: it rises with every new
// leader, so resources fenced on it (driver.FenceStore) refuse a deposed
// leader's writes.
func (e *Election) Campaign(ctx context.Context) (*Term, error) {
	if ctx == nil {
		return nil, fmt.Errorf("leader: %w", &lockx.ArgError{Arg: "ctx", Reason: "nil"})
	}
	owner := newOwner(e.cfg.identity)
	opts := append(e.cfg.lockOpts[:len(e.cfg.lockOpts):len(e.cfg.lockOpts)], lockx.Fair(), lockx.WithWatchdog(e.cfg.lease))
	l, err := e.c.Acquire(lockx.ContextWithOwner(ctx, owner), e.key, opts...)
	if err != nil {
		return nil, fmt.Errorf("leader: campaign for %q: %w", e.name, err)
	}
	return newTerm(e, l), nil
}

// Term is one instance's time in office. Its methods are safe for
// concurrent use.
type Term struct {
	e      *Election
	l      *lockx.Lock
	since  time.Time
	inner  context.Context // cancelled by end
	ctx    context.Context // inner, checking the lease on use
	cancel context.CancelCauseFunc
	stop   func() bool

	once sync.Once
	err  error
}

func newTerm(e *Election, l *lockx.Lock) *Term {
	t := &Term{e: e, l: l, since: time.Now()}
	lctx := l.Context()
	t.inner, t.cancel = context.WithCancelCause(context.WithoutCancel(lctx))
	t.ctx = &termContext{Context: t.inner, t: t}
	t.stop = context.AfterFunc(lctx, func() { t.end(context.Cause(lctx)) })
	return t
}

// termContext is a term's context (or Run's context for fn): its Err and
// Done first compare the clock with the lock's local validity. After a
// pause (GC, SIGSTOP, a suspended VM) the lock's validity timer and the
// leader's next write race to run first; with this check a leader that
// tests Err before writing sees the loss even when its write wins.
type termContext struct {
	context.Context
	t *Term
}

func (c *termContext) Err() error {
	c.t.check()
	return c.Context.Err()
}

func (c *termContext) Done() <-chan struct{} {
	c.t.check()
	return c.Context.Done()
}

// check ends the term if the lock's validity has passed or its hold ended.
func (t *Term) check() {
	if t.inner.Err() != nil {
		return
	}
	until := t.l.ValidUntil()
	switch {
	case until.IsZero():
		if cause := context.Cause(t.l.Context()); cause != nil {
			t.end(cause)
		}
	case !time.Now().Before(until):
		t.end(fmt.Errorf("%w: lease expired locally (seen on use, before the validity timer ran)", lockx.ErrLost))
	}
}

// end cancels the term's context with a cause that names the election and
// the term and wraps why the lock ended (lockx.ErrLost, lockx.ErrClosed,
// ErrResigned).
func (t *Term) end(cause error) {
	t.cancel(&EndError{Name: t.e.name, Identity: t.e.cfg.identity, Term: t.l.Token(), Err: cause})
}

// EndError is the cause of a Term's context: why the term ended. It
// matches (errors.Is) its Err: lockx.ErrLost when the lease could not be
// kept (the leader was cut off, paused or evicted), ErrResigned after
// Resign, lockx.ErrClosed when the client was closed.
type EndError struct {
	Name     string      // the election
	Identity string      // this instance
	Term     lockx.Token // the term that ended
	Err      error
}

func (e *EndError) Error() string {
	return fmt.Sprintf("leader: term %d of %q (%s) ended: %v", e.Term, e.Name, e.Identity, e.Err)
}

func (e *EndError) Unwrap() error { return e.Err }

// Token returns the term: the fencing token of the leader's lock. Pass it
// to the resources the leader writes, which keep the highest term seen and
// refuse lower ones (driver.FenceStore, middleware.Fencing).
func (t *Term) Token() lockx.Token { return t.l.Token() }

// Identity returns the identity of the leader (this instance).
func (t *Term) Identity() string { return t.e.cfg.identity }

// Since returns when this instance became leader, by its own clock.
func (t *Term) Since() time.Time { return t.since }

// Context returns a context cancelled when the term ends: leadership lost
// (cause matching lockx.ErrLost), Resign (ErrResigned) or the client
// closed (lockx.ErrClosed); the cause is an *EndError. The context is
// cancelled by the lock's local validity timer before the lease can have
// run out at the backend, so a leader that stops being sure of its lease
// stops before another can be elected. Its Err and Done also check the
// validity on every call, so a leader resuming from a pause that checks
// Err before a write sees the loss even before the timer has run; contexts
// derived from it see the loss when the timer runs.
func (t *Term) Context() context.Context { return t.ctx }

// Done is Context().Done().
func (t *Term) Done() <-chan struct{} { return t.ctx.Done() }

// Resign ends the term: it cancels the term's context (cause ErrResigned)
// and releases the lock, which wakes the next candidate at once instead of
// leaving it to wait for the lease. Resign is idempotent; a term already
// lost returns nil.
func (t *Term) Resign(ctx context.Context) error {
	t.once.Do(func() {
		t.stop()
		t.end(ErrResigned) // no-op if the term already ended
		err := t.l.Release(ctx)
		if errors.Is(err, lockx.ErrNotHeld) || errors.Is(err, lockx.ErrLost) || errors.Is(err, lockx.ErrClosed) {
			err = nil // already out of office
		}
		if err != nil {
			t.err = fmt.Errorf("leader: resign term %d of %q: %w", t.Token(), t.e.name, err)
		}
	})
	return t.err
}
