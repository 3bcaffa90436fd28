package pglock

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/internal/backendkit"
)

// Acquire implements lockx.Backend: one attempt, in one round trip, to take
// the key's advisory lock on a holder session and draw the fencing token
// from the fence sequence in one statement. The holder's row is written
// once the hold has lasted the publish delay (WithPublishDelay; a Fair()
// grant writes it in its statement).
//
// Idempotent per owner: a repeated attempt by the holder renews its lease
// and returns the same token. A refusal reports the holder's remaining lease
// when its row says so. With req.Fair the attempt is granted only at the
// head of the key's shared queue (lockx_queue), which the attempt joins or
// refreshes when req.Wait is set; plain attempts yield to live fair waiters.
func (b *Backend) Acquire(ctx context.Context, req driver.Request) (driver.Result, error) {
	return b.acquire(ctx, req, false)
}

// AcquireShared is Acquire for a shared (read) lock: any number of owners
// may hold a key shared at once, and none while an exclusive owner holds it.
// Release, Extend, TTL and NotifyLoss apply to shared holds too. Shared
// holds are process-local bookkeeping over one shared advisory lock per key
// and process: they have no row, so another process cannot see or force-
// release them, and they ignore the fair queue (readers may starve a writer;
// the read/write pattern decides how to order them).
//
// It is the internal-facing capability for the read/write lock pattern.
func (b *Backend) AcquireShared(ctx context.Context, req driver.Request) (driver.Result, error) {
	return b.acquire(ctx, req, true)
}

func (b *Backend) acquire(ctx context.Context, req driver.Request, shared bool) (driver.Result, error) {
	if err := backendkit.Ended(ctx, "acquire"); err != nil {
		return driver.Result{}, err
	}
	hash := b.hash(req.Key)
	// A plain waiter may block on a wait session: have them connected
	// before the key turns out to be contended, not after (a connection
	// takes a new server process and a TLS handshake, which under load
	// can last longer than many handoffs).
	blocker := req.Wait && !req.Fair && !shared && b.cfg.waitSessions > 0
	if blocker {
		b.prewarmWait()
	}
	mayBlock := true
	for attempt := 0; ; attempt++ {
		s, err := b.session(ctx, b.index(hash))
		if err != nil {
			return driver.Result{}, backendkit.Unavailable("acquire", err)
		}
		a := b.attempt(ctx, s, hash, req, shared, mayBlock)
		if a.drive != nil {
			a.ds.driveWait(ctx, a.drive)
		}
		if a.flag != nil {
			// A waiter that will be woken by NOTIFY: its process must hold
			// the wait flag before the attempt is sent.
			if err := b.flag(ctx, hash, a.flag); err != nil {
				return driver.Result{}, backendkit.Unavailable("acquire", err)
			}
			mayBlock = false
			continue
		}
		if a.retry && attempt < 3 {
			continue
		}
		if a.p == nil || a.err != nil {
			return a.res, a.err
		}
		select {
		case <-a.p.done:
		case <-ctx.Done():
			b.mu.Lock()
			if !a.p.finished {
				a.p.abandoned = true
				b.mu.Unlock()
				return driver.Result{}, backendkit.Ended(ctx, "acquire")
			}
			b.mu.Unlock()
			<-a.p.done
		}
		if a.p.sliced && attempt < 3 {
			// The wait slice ended. A waiter blocked in the server cannot
			// tell a holder of its own key from one of another key with
			// the same id: a try on the holder session can
			// (ErrKeyCollision), and may win the key meanwhile.
			mayBlock = false
			continue
		}
		if a.p.yield && attempt < 3 {
			// The wait session refused because fair waiters queue: wait
			// for their release by notification instead.
			mayBlock = false
			continue
		}
		if blocker && mayBlock && !a.p.res.Acquired && a.p.err == nil && !a.p.waited && attempt < 3 && b.hasFreeWaitSession() {
			// The key's holder refused a try on the holder session: queue
			// for it on a free wait session at once. The server hands the
			// lock over on release; the caller need not watch for it.
			continue
		}
		return a.p.res, a.p.err
	}
}

// attemptResult is what attempt decided: an answer (res, err), an
// acquisition in flight (p), another try with a fresh session (retry), or a
// watcher that must take the wait flag before the attempt (flag).
type attemptResult struct {
	res   driver.Result
	p     *pending
	retry bool
	err   error
	flag  *watcher
	drive *op // to run on ds by the caller (session.claim)
	ds    *session
}

// attempt decides in process what it can (re-grant, refusal because this
// process holds or is taking the key) and otherwise queues the statement and
// returns its pending state: on the key's holder session s, or — for a
// waiter allowed to block (mayBlock) when a wait session is free — as a
// blocking acquisition on that wait session.
func (b *Backend) attempt(ctx context.Context, s *session, hash int64, req driver.Request, shared, mayBlock bool) attemptResult {
	now := time.Now()
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return attemptResult{err: backendkit.Unavailable("acquire", errClosed)}
	}
	sl := b.slots[hash]
	if sl != nil && sl.excl != nil && !shared && sl.excl.key == req.Key && sl.excl.owner == req.Owner {
		h := sl.excl
		b.mu.Unlock()
		err := b.extendHold(ctx, h, req.Lease)
		if err == nil {
			return attemptResult{res: driver.Result{Acquired: true, Token: h.token, TTL: req.Lease}}
		}
		return attemptResult{retry: isNotHeld(err), err: err}
	}
	if sl != nil && (sl.excl != nil && sl.excl.key != req.Key || len(sl.shared) > 0 && sl.sharedKey != req.Key) {
		// This process holds the id under another key.
		b.mu.Unlock()
		return attemptResult{err: collision(req.Key)}
	}
	// A waiter blocks on a free wait session once it has been refused
	// (it watches), or at once when the key was refused recently: an
	// uncontended key keeps the pipelined try on its holder session.
	var ws *session
	w := b.watcherLocked(hash, req.Owner)
	if mayBlock && !shared && !req.Fair && req.Wait && (sl == nil || sl.pending == nil && len(sl.shared) == 0) &&
		(w != nil || now.Sub(b.refused[hash]) < hotFor) {
		ws = b.freeWaitSessionLocked()
	}
	if w != nil && ws == nil && !w.X.flagged {
		b.mu.Unlock()
		return attemptResult{flag: w}
	}
	if w != nil && ws == nil {
		// Flagged: a release anywhere notifies, naming the fair queue's
		// head, so a fair watcher need not be woken by every local release.
		// Shared attempts ignore the fair queue: a notification naming its
		// head does not wake them.
		w.X.fair = req.Fair && !shared
	}
	if ws == nil && sl != nil {
		switch {
		case sl.excl != nil:
			ttl := sl.excl.remaining(now)
			b.markRefused(hash, now)
			b.mu.Unlock()
			return b.refuse(ctx, s, hash, req, shared, ttl)
		case len(sl.shared) > 0:
			if !shared {
				b.mu.Unlock()
				return b.refuse(ctx, s, hash, req, shared, 0)
			}
			h := sl.shared[req.Owner]
			if h == nil { // join the process's shared lock: no round trip
				h = &hold{hash: hash, key: req.Key, owner: req.Owner, token: sl.sharedTok, shared: true, sess: sl.sess}
				sl.shared[req.Owner] = h
				h.lease.Arm(req.Lease, func() { b.expire(h) })
			} else {
				h.lease.Reset(req.Lease)
			}
			h.deadline = now.Add(req.Lease)
			b.mu.Unlock()
			return attemptResult{res: driver.Result{Acquired: true, Token: h.token, TTL: req.Lease}}
		case sl.pending != nil:
			if req.Wait && sl.pending.owner != req.Owner {
				sl.pending.behind = append(sl.pending.behind, req.Owner)
			}
			b.mu.Unlock()
			return b.refuse(ctx, s, hash, req, shared, 0)
		}
	}
	if sl == nil {
		sl = &slot{}
		b.slots[hash] = sl
	}
	p := &pending{owner: req.Owner, done: make(chan struct{})}
	sl.pending = p
	o := &op{}
	switch {
	case ws != nil:
		s = ws
		ws.busy = true
		o.stmt = stAcquireWait
		slice := []byte(strconv.FormatInt(ms(b.cfg.waitSlice), 10) + "ms")
		if b.cfg.publishDelay > 0 {
			o.args = [][]byte{i8(hash), slice} // no row: hash and slice only
		} else {
			o.args = [][]byte{i8(hash), []byte(req.Key), []byte(req.Owner), i8(ms(req.Lease)), slice}
		}
	case shared:
		o.stmt, o.args = stAcqShared, [][]byte{i8(hash)}
	case req.Fair:
		qttl := req.QueueTTL
		if qttl <= 0 {
			qttl = lockx.DefaultQueueTTL
		}
		o.stmt = stAcquireFair
		b.fairSent.Add(1)
		o.args = [][]byte{i8(hash), []byte(req.Key), []byte(req.Owner), i8(ms(req.Lease)), boolean(req.Wait), i8(ms(qttl))}
	default:
		o.stmt = stAcquire
		o.args = [][]byte{i8(hash), []byte(req.Key), []byte(req.Owner), i8(ms(req.Lease))}
		o.group = &groupArgs{kind: groupAcquire, hash: hash, key: []byte(req.Key), owner: []byte(req.Owner), leaseMS: ms(req.Lease)}
	}
	o.fin = func(r result) { b.granted(s, sl, p, hash, req, shared, now, r) }
	if ws != nil && ws.claim() {
		b.mu.Unlock()
		return attemptResult{p: p, drive: o, ds: ws}
	}
	if !s.enqueue(o) {
		s.busy = false
		sl.pending = nil
		b.dropIfEmpty(hash, sl)
		b.mu.Unlock()
		return attemptResult{retry: true, err: backendkit.Unavailable("acquire", errSessionLost)}
	}
	b.mu.Unlock()
	return attemptResult{p: p}
}

// defaultWaitSlice bounds one blocking acquisition on a wait session. A waiter
// whose slice ends is woken to try again at once (losing its place in the
// server's queue), so the slice bounds how far a blocked attempt can
// overrun the caller's wait budget (lockx.WithWait), which the Backend
// does not see. A caller whose context ends stops waiting at once; its wait
// session stays blocked until the slice ends, and a late grant is given
// back.
const defaultWaitSlice = 200 * time.Millisecond

// hotFor is how long a refusal, or a grant on a wait session, marks a key
// as contended, so that the next waiting attempt goes straight to a wait
// session instead of first trying on the holder session (a try that fails
// while anyone queues in the server).
const hotFor = time.Second

// markRefused records a refused attempt on hash. The record is bounded:
// past 4,096 keys, stale ones are dropped. Callers hold b.mu.
func (b *Backend) markRefused(hash int64, now time.Time) {
	if b.cfg.waitSessions == 0 {
		return
	}
	if len(b.refused) >= 4096 {
		for h, at := range b.refused {
			if now.Sub(at) >= hotFor {
				delete(b.refused, h)
			}
		}
		if len(b.refused) >= 4096 {
			return
		}
	}
	b.refused[hash] = now
}

// freeWaitSessionLocked returns a connected wait session that neither
// blocks nor carries a hold, or nil. Callers hold b.mu.
func (b *Backend) freeWaitSessionLocked() *session {
	for i := b.cfg.sessions; i < len(b.sessions); i++ {
		ws := b.sessions[i].cur.Load()
		if ws != nil && !ws.busy && (ws.lent == nil || ws.lent.gone) && !ws.isDead() {
			return ws
		}
	}
	return nil
}

// hasFreeWaitSession reports whether a wait session is free now.
func (b *Backend) hasFreeWaitSession() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.freeWaitSessionLocked() != nil
}

// refuse answers an attempt this process refuses by itself. A fair waiter
// still joins (or refreshes its place in) the shared queue, so that order
// holds across processes.
func (b *Backend) refuse(ctx context.Context, s *session, hash int64, req driver.Request, shared bool, ttl time.Duration) attemptResult {
	if shared || !req.Fair || !req.Wait {
		return attemptResult{res: driver.Result{TTL: ttl}}
	}
	qttl := req.QueueTTL
	if qttl <= 0 {
		qttl = lockx.DefaultQueueTTL
	}
	b.fairSent.Add(1)
	ch := make(chan result, 1)
	o := &op{stmt: stEnqueue, args: [][]byte{i8(hash), []byte(req.Owner), i8(ms(qttl))}, fin: func(r result) { ch <- r }}
	if !s.enqueue(o) {
		return attemptResult{retry: true, err: backendkit.Unavailable("acquire", errSessionLost)}
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return attemptResult{err: backendkit.Unavailable("acquire", usageError(r.err, b.names))}
		}
	case <-ctx.Done():
		return attemptResult{err: backendkit.Ended(ctx, "acquire")}
	}
	return attemptResult{res: driver.Result{TTL: ttl}}
}

// granted records the outcome of an acquisition statement. It runs on the
// session's goroutine, so the state is right whether or not the caller is
// still waiting.
func (b *Backend) granted(s *session, sl *slot, p *pending, hash int64, req driver.Request, shared bool, start time.Time, r result) {
	b.mu.Lock()
	p.finished = true
	p.waited = s.waiting
	if sl.pending == p {
		sl.pending = nil
	}
	if s.waiting {
		s.busy = false
	}
	switch {
	case r.err != nil && s.waiting && isLockTimeout(r.err):
		// The wait slice ended. PostgreSQL may report the timeout although
		// it granted the lock in the same instant (the timeout's cancel is
		// acted on after the grant), and a session lock outlives the
		// statement's error: give it back to be sure. The unlock runs
		// before anything queued later on the session. The waiter tries
		// again at once.
		if !s.isDead() && !b.closed {
			b.giveBackOp(s, hash, req.Owner)
		}
		p.sliced = true
		b.wakeOwnerLocked(hash, req.Owner)
	case r.err != nil:
		p.err = backendkit.Unavailable("acquire", usageError(r.err, b.names))
		if !s.isDead() && !b.closed {
			b.cleanupFailedGrant(s, sl, hash, shared)
		}
		b.wakeLocked(hash, "") // local waiters refused because of us retry
	case r.isNull(0) && r.val(2) == 1:
		p.err = collision(req.Key)
	case r.isNull(0):
		p.res = driver.Result{TTL: time.Duration(r.val(1)) * time.Millisecond}
		p.yield = s.waiting
		b.markRefused(hash, start)
	case p.abandoned || b.closed || s.isDead():
		// Nobody will use this grant (or it died with its session): give
		// it back. Release is owner-checked, so this frees nothing else.
		p.err = backendkit.Unavailable("acquire", errSessionLost)
		if !s.isDead() && !b.closed {
			b.releaseOp(s, hash, req.Owner, shared, req.Fair, nil)
		}
		b.wakeLocked(hash, "")
	default:
		if s.waiting {
			// Granted on a wait session: the key was contended, and its
			// waiters now queue in the server, where none is refused. Keep
			// the mark fresh, or once it lapsed every waiter's next attempt
			// would try on its holder session first, be refused there, and
			// queue at the back.
			b.markRefused(hash, time.Now())
		}
		h := &hold{hash: hash, key: req.Key, owner: req.Owner, token: driver.Token(r.val(0)), shared: shared,
			sess: s, deadline: start.Add(req.Lease), since: start}
		h.lease.Arm(req.Lease, func() { b.expire(h) })
		if !shared {
			b.armPublish(h, req.Fair) // a fair grant writes its row in its statement
		}
		if old := sl.excl; old != nil {
			// A wait session was granted the key while this process still
			// counted a hold of it on another session: the server freed
			// that one (its session died, or its reap is in flight).
			b.lose(old)
		}
		sl.sess = s
		if s.waiting {
			s.lent = h
		}
		if shared {
			sl.shared = map[driver.Owner]*hold{req.Owner: h}
			sl.sharedKey, sl.sharedTok = req.Key, h.token
		} else {
			sl.excl = h
		}
		p.res = driver.Result{Acquired: true, Token: h.token, TTL: req.Lease}
	}
	if !p.res.Acquired {
		// The owners refused because this attempt was in flight retry: one
		// may be the fair queue's head, whose notification it consumed on
		// that refusal. A grant wakes nobody: its release will.
		for _, o := range p.behind {
			b.wakeOwnerLocked(hash, o)
		}
	}
	p.behind = nil
	if b.slots[hash] == sl {
		b.dropIfEmpty(hash, sl)
	}
	b.mu.Unlock()
	close(p.done)
}

// giveBackOp queues the release of a grant that may have happened on s
// without being reported. If the release fails, the lock's state is unknown
// and the session is ended. Callers hold b.mu.
func (b *Backend) giveBackOp(s *session, hash int64, owner driver.Owner) {
	w1, w2 := waitFlag(hash)
	s.enqueue(&op{stmt: stRelease, args: [][]byte{i8(hash), []byte(owner), i4(w1), i4(w2), []byte(b.names.channel), b.payload(hash)},
		fin: func(r result) {
			if r.err != nil && !s.isDead() {
				s.kill()
			}
		}})
}

// isLockTimeout reports PostgreSQL's lock_not_available (55P03): the lock
// timeout of a blocking acquisition ended.
func isLockTimeout(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}

// cleanupFailedGrant undoes a grant statement that failed: it may have
// failed after taking the lock. Nobody else in this process holds the hash
// on this session, and the slot stays blocked until the unlock has run, so
// no later acquisition (which a batch may reorder before a plain statement)
// can be counted on the session before it. Callers hold b.mu.
func (b *Backend) cleanupFailedGrant(s *session, sl *slot, hash int64, shared bool) {
	blocker := &pending{done: make(chan struct{}), finished: true}
	close(blocker.done)
	sl.pending = blocker
	stmt := stUnlock
	if shared {
		stmt = stUnlockShared
	}
	ok := s.enqueue(&op{stmt: stmt, args: [][]byte{i8(hash)}, fin: func(r result) {
		if r.err != nil {
			s.kill() // cannot know the lock's state: end the session
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if sl.pending == blocker {
			sl.pending = nil
			b.dropIfEmpty(hash, sl)
		}
		b.wakeLocked(hash, "")
	}})
	if !ok {
		sl.pending = nil
	}
}
