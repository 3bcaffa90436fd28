package lockx

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
)

// DefaultMaxKeys is the largest number of distinct keys AcquireMany takes in
// one set unless WithMaxKeys says otherwise.
const DefaultMaxKeys = 64

// WithMaxKeys sets the largest number of distinct keys AcquireMany and
// TryAcquireMany accept in one set (default DefaultMaxKeys). A non-positive
// n is an *ArgError at the call.
func WithMaxKeys(n int) Option {
	return func(c *config) {
		if n <= 0 {
			c.fail("max keys", "must be positive")
			return
		}
		c.maxKeys = n
	}
}

// LockSet is a set of locks taken together by AcquireMany: one Lock per
// distinct key, each with its own fencing token, released together. Its
// Context and Lost end when any member is lost. A LockSet is safe for
// concurrent use.
type LockSet struct {
	locks    []*Lock // sorted by key
	owner    Owner
	parent   context.Context // the AcquireMany context, for its values
	mu       sync.Mutex
	ctx      context.Context // made on first use, as a hold's
	cancel   context.CancelCauseFunc
	cause    error // why the set ended, once it has; the first cause wins
	lost     chan struct{}
	lostOnce sync.Once
	watch    *endWatch // on every member's end
	released atomic.Bool
}

// AcquireMany obtains the locks of every key, all or nothing. Duplicate keys
// count once, and keys are taken in sorted order, so two callers whose sets
// overlap never wait for each other in a cycle. The wait budget (WithWait)
// and ctx bound the whole set. If a key cannot be taken, the keys already
// taken are released and the error (a *KeyError with Op "acquire many")
// names the key; it matches ErrNotAcquired as Acquire's does.
//
// All members share one owner: the one ctx carries (ContextWithOwner or a
// Lock.Context), so keys that owner already holds on this client are
// re-entered as Acquire would, or a fresh one. The set's Context carries it.
// With the watchdog, members are renewed together, in one ExtendMany round
// trip per renewal period on a BatchExtender backend (one per group, all at
// once, on an ExtendPartitioner: one per node of a Redis Cluster). A backend implementing
// ManyAcquirer is asked for the whole set in one round trip first.
func (c *Client) AcquireMany(ctx context.Context, keys []string, opts ...Option) (*LockSet, error) {
	return c.acquireMany(ctx, keys, opts, true)
}

// TryAcquireMany makes one attempt at every key, all or nothing: if any key
// is held by another owner, the keys already taken are released and the
// error, naming that key, matches ErrNotAcquired.
func (c *Client) TryAcquireMany(ctx context.Context, keys []string, opts ...Option) (*LockSet, error) {
	return c.acquireMany(ctx, keys, opts, false)
}

const opMany = "acquire many"

func manyError(key string, err error) error {
	if err == nil {
		return nil
	}
	var ke *KeyError
	if errors.As(err, &ke) && ke.Key == key {
		err = ke.Err
	}
	return &KeyError{Op: opMany, Key: key, Err: err}
}

func (c *Client) acquireMany(ctx context.Context, keys []string, opts []Option, wait bool) (*LockSet, error) {
	cfg := c.callConfig(opts)
	maxKeys := cfg.maxKeys
	if cfg.err != nil {
		return nil, &KeyError{Op: opMany, Err: cfg.err}
	}
	if ctx == nil {
		return nil, &KeyError{Op: opMany, Err: &ArgError{Arg: "ctx", Reason: "nil"}}
	}
	if len(keys) == 0 {
		return nil, &KeyError{Op: opMany, Err: &ArgError{Arg: "keys", Reason: "empty"}}
	}
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	for _, k := range sorted {
		if err := c.validate(k, cfg); err != nil {
			return nil, manyError(k, err)
		}
	}
	if len(sorted) > maxKeys {
		return nil, &KeyError{Op: opMany, Err: &ArgError{Arg: "keys", Reason: fmt.Sprintf("%d distinct keys, more than the maximum %d", len(sorted), maxKeys)}}
	}
	if err := c.checkOpen(); err != nil {
		return nil, &KeyError{Op: opMany, Err: err}
	}

	owner, explicit := OwnerFromContext(ctx)
	if !explicit {
		owner = NewOwner()
		ctx = ContextWithOwner(ctx, owner)
	}
	var locks []*Lock
	if ma := c.manyAcq; ma != nil && !explicit && !cfg.fair && !cfg.localFirst {
		locks = c.acquireBatch(ctx, ma, sorted, owner, cfg)
	}
	if locks == nil {
		var err error
		if locks, err = c.acquireSequential(ctx, sorted, opts, cfg, wait); err != nil {
			return nil, err
		}
	}
	c.wd.align(locks)
	return newLockSet(ctx, owner, locks), nil
}

// acquireSequential takes the keys one by one in sorted order, sharing the
// wait budget; on failure it releases what it took.
func (c *Client) acquireSequential(ctx context.Context, sorted []string, opts []Option, cfg *config, wait bool) ([]*Lock, error) {
	var budgetAt time.Time
	if wait && cfg.wait > 0 {
		budgetAt = time.Now().Add(cfg.wait)
	}
	locks := make([]*Lock, 0, len(sorted))
	kopts := append(slices.Clip(opts), nil)
	for _, k := range sorted {
		if !budgetAt.IsZero() {
			left := time.Until(budgetAt)
			if left <= 0 {
				releaseAll(ctx, locks)
				return nil, manyError(k, ErrNotAcquired)
			}
			kopts[len(kopts)-1] = WithWait(left)
		}
		l, err := c.acquire(ctx, k, &c.lockOps, kopts, wait)
		if err != nil {
			releaseAll(ctx, locks)
			return nil, manyError(k, err)
		}
		locks = append(locks, l)
	}
	return locks, nil
}

// acquireBatch asks a ManyAcquirer for the whole set once. It returns the
// registered locks, or nil if the set was not granted (nothing is held then).
func (c *Client) acquireBatch(ctx context.Context, ma driver.ManyAcquirer, sorted []string, owner Owner, cfg *config) []*Lock {
	reqs := make([]driver.Request, len(sorted))
	for i, k := range sorted {
		reqs[i] = driver.Request{Key: k, Owner: owner, Lease: cfg.lease, QueueTTL: cfg.queueTTL}
	}
	start := time.Now()
	res, err := ma.AcquireMany(ctx, reqs)
	granted := err == nil && len(res) == len(reqs)
	for i := 0; granted && i < len(res); i++ {
		granted = res[i].Acquired && res[i].Token.Valid()
	}
	if !granted {
		if err != nil || len(res) != len(reqs) || anyAcquired(res) {
			for _, r := range reqs { // unknown or inconsistent outcome: free all, owner-checked
				c.abandon(&c.lockOps, r)
			}
		}
		return nil
	}
	locks, err := c.registerSet(ctx, reqs, res, start, cfg)
	if cfg.observer != nil {
		for i, r := range reqs {
			var l *Lock
			if err == nil {
				l = locks[i]
			}
			a := acquisition{c: c, ops: &c.lockOps, cfg: cfg, req: r,
				st: acquireStats{attempts: 1, lastStart: start, newHold: err == nil}}
			a.observe(ctx, cfg.observer, start, l, keyError("acquire", r.Key, err))
		}
	}
	return locks
}

// registerSet registers the holds of a set that one ManyAcquirer call
// granted, as register would each: under one hold of the Client's mutex,
// from one allocation of holds and one of handles. The set's owner was
// made for it, so no member can re-enter an existing hold. If the Client
// has closed meanwhile, it frees every key and returns ErrClosed.
func (c *Client) registerSet(ctx context.Context, reqs []driver.Request, res []driver.Result, start time.Time, cfg *config) ([]*Lock, error) {
	holds := make([]hold, len(reqs))
	hs := make([]*hold, len(reqs))
	locks := make([]*Lock, len(reqs))
	for i, r := range reqs {
		// A member's owner is the set's, which its Context carries: explicit.
		a := acquisition{c: c, ops: &c.lockOps, cfg: cfg, req: r, hk: holdKey{false, c.lockOps.Kind, r.Key, r.Owner},
			explicit: true, res: res[i], start: start}
		h := &holds[i]
		h.init(ctx, &a)
		hs[i] = h
		locks[i] = &h.first
	}
	c.mu.Lock()
	if c.closed { // Close ran while we waited: nobody would renew or release these grants
		c.mu.Unlock()
		for _, r := range reqs {
			c.abandon(&c.lockOps, r)
		}
		return nil, ErrClosed
	}
	for _, h := range hs {
		c.holds[h.hk] = h
	}
	c.mu.Unlock()
	for _, h := range hs {
		h.armValidity()
		c.attach(h)
	}
	return locks, nil
}

func anyAcquired(res []driver.Result) bool {
	for _, r := range res {
		if r.Acquired {
			return true
		}
	}
	return false
}

// align moves every watchdog member's next renewal to the earliest one of
// the set, so the watchdog renews the set together (one ExtendMany) from
// then on. Renewing early is always safe; the earliest renewal is already
// known to the watchdog, so it need not be woken. It holds w.mu, as collect
// does, so a collect sees the set either before or after it, never half
// moved.
//
// A member whose renewal is in flight (the set took long to gather, and the
// watchdog renewed its first members meanwhile) counts with the renewal
// that call will schedule, about lease/3 after it started, and keeps it: its
// stale schedule would pull the others forward into a round trip of their
// own while it is still out.
func (w *watchdog) align(locks []*Lock) {
	if !slices.ContainsFunc(locks, func(l *Lock) bool { return l.h.watchdog }) {
		return // nothing to renew: no lock to take
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var first time.Time
	for _, l := range locks {
		h := l.h
		h.mu.Lock()
		next := h.nextRenew
		if h.renewing {
			next = h.renewFrom.Add(h.lease / 3)
		}
		if h.watchdog && !h.finished && (first.IsZero() || next.Before(first)) {
			first = next
		}
		h.mu.Unlock()
	}
	if first.IsZero() {
		return
	}
	for _, l := range locks {
		h := l.h
		h.mu.Lock()
		if h.watchdog && !h.finished && !h.renewing && h.nextRenew.After(first) {
			h.nextRenew = first
		}
		h.mu.Unlock()
	}
}

// releaseAll releases every lock, best effort, all at once. With a backend
// that is a ManyReleaser, the keys the set gives back go in one ReleaseMany
// call (one round trip per node); otherwise the releases run concurrently,
// and on a batching backend share round trips (redislock coalesces them
// into pipelines).
func releaseAll(ctx context.Context, locks []*Lock) error {
	rctx := context.WithoutCancel(ctx)
	if len(locks) == 0 {
		return nil
	}
	c := locks[0].h.c
	if mr := c.manyRel; mr != nil && len(locks) > 1 {
		return releaseMany(rctx, mr, locks)
	}
	errs := make([]error, len(locks))
	var wg sync.WaitGroup
	for i, l := range locks[1:] {
		wg.Go(func() { errs[i+1] = l.Release(rctx) })
	}
	errs[0] = locks[0].Release(rctx)
	wg.Wait()
	return errors.Join(errs...)
}

// releaseMany is releaseAll through a driver.ManyReleaser. Each member goes through
// the same steps as Lock.Release — the last handle of a hold finishes it,
// an explicit owner's key is gated against a same-owner acquisition while
// its release is out, an unknown outcome is retried for that key alone, and
// the observer hears of each member — but the plain locks the set gives
// back reach the backend together. The gates are entered in the set's key
// order, as every other multi-key path takes keys.
func releaseMany(ctx context.Context, mr driver.ManyReleaser, locks []*Lock) error {
	start := time.Now()
	errs := make([]error, len(locks))
	finals := make([]bool, len(locks))
	rs := make([]finalRelease, len(locks))
	var batch []int // members to release in the one call
	var owner Owner
	for i, l := range locks {
		r, final, err := l.beginRelease()
		rs[i], finals[i], errs[i] = r, final, err
		if !final || !r.owned {
			continue
		}
		if !r.h.plain || (len(batch) > 0 && r.h.owner != owner) {
			// Not the backend's plain lock, or another owner: on its own.
			leave := r.enterGate(ctx)
			err := releaseWithRetry(ctx, r.h.ops.Release, r.h.key, r.h.owner)
			leave()
			errs[i] = err
			continue
		}
		owner = r.h.owner
		batch = append(batch, i)
	}
	if len(batch) > 0 {
		releaseBatch(ctx, mr, rs, batch, errs)
	}
	for i, l := range locks {
		if finals[i] {
			errs[i] = rs[i].finish(errs[i])
		}
		l.observeRelease(ctx, start, finals[i], errs[i])
	}
	return errors.Join(errs...)
}

// releaseBatch releases the members rs[i] for i in batch, plain locks of
// one owner, in one driver.ManyReleaser call, gated as Lock.Release gates one, and
// retries alone each key whose outcome is unknown. It sets errs[i].
func releaseBatch(ctx context.Context, mr driver.ManyReleaser, rs []finalRelease, batch []int, errs []error) {
	keys := make([]string, len(batch))
	leaves := make([]func(), len(batch))
	for j, i := range batch {
		keys[j] = rs[i].h.key
		leaves[j] = rs[i].enterGate(ctx)
	}
	berrs := mr.ReleaseMany(ctx, keys, rs[batch[0]].h.owner)
	var wg sync.WaitGroup
	for j, i := range batch {
		var err error
		if j < len(berrs) {
			err = berrs[j]
		} else {
			err = driver.Unavailable("release", errors.New("release many returned too few results"))
		}
		if err == nil || isNotHeld(err) {
			errs[i] = err
			continue
		}
		h := rs[i].h
		wg.Go(func() { errs[i] = retryRelease(ctx, h.ops.Release, h.key, h.owner, err) })
	}
	wg.Wait()
	for _, leave := range leaves {
		leave()
	}
}

func newLockSet(ctx context.Context, owner Owner, locks []*Lock) *LockSet {
	s := &LockSet{locks: locks, owner: owner, parent: ctx, lost: make(chan struct{})}
	s.watch = &endWatch{s.memberEnded} // one arrangement, on every member
	for _, l := range locks {
		l.h.watchEnd(s.watch)
	}
	return s
}

// memberEnded ends the set's context with the cause a member ended with; a
// lost member also closes Lost.
func (s *LockSet) memberEnded(cause error) {
	if errors.Is(cause, ErrLost) {
		s.end(ErrLost) // before Lost closes, so a reader woken by Lost sees the cause
		s.lostOnce.Do(func() { close(s.lost) })
		return
	}
	s.end(cause)
}

// end records why the set ended and cancels its context, if made, with
// that cause. The first cause wins.
func (s *LockSet) end(cause error) {
	s.mu.Lock()
	if s.cause == nil {
		s.cause = cause
	}
	if s.cancel != nil {
		s.cancel(cause)
	}
	s.mu.Unlock()
}

// Keys returns the set's distinct keys in sorted order (the order they were
// taken in).
func (s *LockSet) Keys() []string {
	if s == nil {
		return nil
	}
	keys := make([]string, len(s.locks))
	for i, l := range s.locks {
		keys[i] = l.Key()
	}
	return keys
}

// Locks returns the members' handles, sorted by key. They belong to the
// set: release the set, not them.
func (s *LockSet) Locks() []*Lock {
	if s == nil {
		return nil
	}
	return slices.Clone(s.locks)
}

// Lock returns the member handle of key, or nil if key is not in the set.
func (s *LockSet) Lock(key string) *Lock {
	if s == nil {
		return nil
	}
	i, ok := slices.BinarySearchFunc(s.locks, key, func(l *Lock, k string) int {
		switch {
		case l.Key() < k:
			return -1
		case l.Key() > k:
			return 1
		}
		return 0
	})
	if !ok {
		return nil
	}
	return s.locks[i]
}

// Token returns key's fencing token in the set, or 0 if key is not in it.
func (s *LockSet) Token(key string) Token { return s.Lock(key).Token() }

// Owner returns the owner every member is held under.
func (s *LockSet) Owner() Owner {
	if s == nil {
		return ""
	}
	return s.owner
}

// Lost returns a channel that is closed when any member's lease is lost.
// It is not closed by Release.
func (s *LockSet) Lost() <-chan struct{} {
	if s == nil {
		return closedChan
	}
	return s.lost
}

// Context returns a context that carries the set's owner (so Acquire or
// AcquireMany under it re-enters the members) and is cancelled when any
// member is lost (cause ErrLost), when the set is released (ErrReleased) or
// when the client is closed (ErrClosed). Like Lock.Context, it keeps the
// values but not the cancellation of the context given to AcquireMany.
func (s *LockSet) Context() context.Context {
	if s == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(ErrNotHeld)
		return ctx
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return lazyContext(&s.ctx, &s.cancel, s.parent, s.owner, s.cause)
}

// Release releases every member, all at once (so a batching backend gives
// the set back in about one round trip), and cancels the set's context with
// ErrReleased. Every member is released even
// if some fail; the errors are joined (a lost member's matches ErrLost).
// Releasing a set twice returns ErrNotHeld.
func (s *LockSet) Release(ctx context.Context) error {
	if s == nil || !s.released.CompareAndSwap(false, true) {
		return &KeyError{Op: "release many", Err: ErrNotHeld}
	}
	for _, l := range s.locks {
		l.h.unwatch(s.watch)
	}
	s.end(ErrReleased)
	if ctx == nil {
		ctx = context.Background()
	}
	return releaseAll(ctx, s.locks)
}
