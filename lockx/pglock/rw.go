package pglock

import (
	"context"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/internal/backendkit"
)

// Read/write locks (lockx.RWBackend) are PostgreSQL advisory locks on the
// holder sessions, like plain locks: a reader holds the key's read/write
// advisory key (patternLock(kindRW, key)) with pg_try_advisory_lock_shared,
// a writer holds the same 64-bit key with pg_try_advisory_lock, so the
// server itself guarantees readers-xor-writer across processes. Each
// reader takes its own shared reference (they stack on a session), so a
// reader is one statement to acquire and one to release, and no decision
// transaction serialises readers of a key.
//
// PostgreSQL cannot tell two owners of one session apart (a session never
// conflicts with itself), so the Backend's memory (rwSlot) keeps the
// exclusion between owners of one process, as it does for plain locks.
//
// Around the locks, rows give what advisory locks lack:
//
//   - each hold is a row of lockx_pattern_held (kind rw) with its lease on
//     the server's clock, written in the grant's statement: it lets any
//     process extend, check or force-release a hold by owner; the holder's
//     next renewal finds a force-released row gone and frees its lock;
//   - waiters are rows of lockx_pattern_queue with the queue TTL: a writer
//     refused while waiting queues there, and a fair reader's statement
//     checks, in the same statement as pg_try_advisory_lock_shared, that no
//     live writer is queued ahead of it (writer preference). A writer
//     waiter that crashed stops counting when its entry's TTL ends (every
//     retry refreshes it); one that gives up withdraws it (ReleaseRW);
//   - the key's last write token lives in lockx_pattern_state: a reader's
//     token is the token of the key's latest write (a fresh one from the
//     fence sequence the first time a never-written key is read).
//
// Wake-ups: a writer's release, and a reader's release that leaves no
// holder behind, notify the key's watchers when some process waits for the
// key (holds its wait flag, as for plain locks), naming the waiters that can
// now be granted: the readers queued before the first queued writer, or that
// writer.

// rwSlot is the in-process state of one read/write key (by its plain
// hash): this process's readers and writer, and attempts in flight.
type rwSlot struct {
	readers map[driver.Owner]*hold
	writer  *hold
	flightR int
	flightW bool
	// drained is closed when the last read attempt in flight ends, for a
	// write attempt that waits for them; wdone when a write attempt ends,
	// for the attempts that wait for it (rwTurnLocked).
	drained chan struct{}
	wdone   chan struct{}
}

func (sl *rwSlot) empty() bool {
	return len(sl.readers) == 0 && sl.writer == nil && sl.flightR == 0 && !sl.flightW
}

// rwSlotLocked returns the slot of hash p, creating it. Callers hold b.mu.
func (b *Backend) rwSlotLocked(p int64) *rwSlot {
	if b.rws == nil {
		b.rws = make(map[int64]*rwSlot)
	}
	sl := b.rws[p]
	if sl == nil {
		sl = &rwSlot{readers: make(map[driver.Owner]*hold)}
		b.rws[p] = sl
	}
	return sl
}

func (b *Backend) rwDropIfEmpty(p int64, sl *rwSlot) {
	if sl.empty() && b.rws[p] == sl {
		delete(b.rws, p)
	}
}

// Statement names of the read/write lock, prepared on every holder session.
const (
	stRWRead    = "lockx_rw_read"
	stRWWrite   = "lockx_rw_write"
	stRWRelease = "lockx_rw_release"
	stRWExtend  = "lockx_rw_extend"
	stRWRemote  = "lockx_rw_remote_release"
)

// How a read statement tries ($8).
const (
	readTry    = 0 // writer preference (if fair) and the shared lock
	readForce  = 1 // downgrade: the session holds the key exclusively
	readRefuse = 2 // refused in process: only queue (fair, wait)
)

// sqlRWLiveQueue selects the key's live queue entries.
const sqlRWLiveQueue = `{pqueue} q WHERE q.kind = 1 AND q.hash = $2::int8 AND q.expires > clock_timestamp()`

// sqlRWQueueUp joins the queue or refreshes the entry (keeping its place
// unless it had expired) for owner $3 in mode m, from CTE g when its token
// is NULL. $6 wait, $7 queue TTL ms.
func sqlRWQueueUp(m string, cond string) string {
	return `INSERT INTO {pqueue} AS q (kind, hash, owner, mode, count, seq, expires)
	SELECT 1, $2::int8, $3::bytea, ` + m + `, 1, (extract(epoch FROM clock_timestamp()) * 1000000)::int8, clock_timestamp() + $7::int8 * interval '1 millisecond'
	FROM g WHERE g.token IS NULL AND $6::bool AND ` + cond + `
	ON CONFLICT (kind, hash, owner) DO UPDATE SET mode = excluded.mode, expires = excluded.expires,
		seq = CASE WHEN q.expires <= clock_timestamp() THEN excluded.seq ELSE q.seq END`
}

// sqlRWHoldRow records (or renews) the grant's row: mode m, lease $4 ms.
func sqlRWHoldRow(m string) string {
	return `INSERT INTO {pheld} AS h (kind, hash, owner, mode, count, token, expires)
	SELECT 1, $2::int8, $3::bytea, ` + m + `, 1, g.token, clock_timestamp() + $4::int8 * interval '1 millisecond'
	FROM g WHERE g.token IS NOT NULL
	ON CONFLICT (kind, hash, owner, mode) DO UPDATE SET token = excluded.token, expires = excluded.expires`
}

// sqlRWWakeNames is the payload of a wake-up for the key's queue as it
// stands without $3: the readers queued before the first queued writer,
// else that writer; every watcher if no writer is queued (readers under
// reader preference wait without queueing) or too many are named. $6 is
// "<hash>".
var sqlRWWakeNames = `(WITH q AS (SELECT q.owner, q.mode, q.seq FROM ` + sqlRWLiveQueue + ` AND q.owner <> $3::bytea),
		w AS (SELECT min(seq) AS s FROM q WHERE mode = 2),
		r AS (SELECT owner, seq FROM q WHERE seq < coalesce((SELECT s FROM w), 9223372036854775807))
	SELECT CASE
		WHEN (SELECT s FROM w) IS NULL OR (SELECT count(*) FROM r) > ` + strconv.Itoa(maxWakeNames) + ` THEN $6::text
		WHEN EXISTS (SELECT 1 FROM r) THEN $6::text || ' ' || (SELECT string_agg(encode(owner, 'hex'), ' ' ORDER BY seq) FROM r)
		ELSE $6::text || ' ' || (SELECT encode(owner, 'hex') FROM q WHERE mode = 2 AND seq = (SELECT s FROM w) LIMIT 1)
	END)`

// rwStatements are the read/write lock's statements. Parameters common to
// all: $1 the read/write advisory key, $2 the key's hash (rows, queue,
// notifications), $3 owner.
func (n names) rwStatements() map[string]string {
	m := map[string]string{
		// A read attempt. $4 lease ms, $5 fair, $6 wait, $7 queue TTL ms,
		// $8 how (readTry, readForce, readRefuse). A fair reader yields to a
		// live writer queued ahead of it (before its own entry, if queued),
		// checked before the shared lock in the same statement. Returns the
		// token (NULL: refused) and, refused, the writer's remaining lease.
		stRWRead: `WITH g0 AS MATERIALIZED (
	SELECT CASE WHEN $8::int8 = 2 THEN false
		WHEN $8::int8 = 1 THEN pg_try_advisory_lock_shared($1::int8)
		WHEN $5::bool AND EXISTS (SELECT 1 FROM ` + sqlRWLiveQueue + ` AND q.mode = 2 AND q.owner <> $3::bytea
			AND q.seq < coalesce((SELECT o.seq FROM {pqueue} o WHERE o.kind = 1 AND o.hash = $2::int8 AND o.owner = $3::bytea
				AND o.expires > clock_timestamp()), 9223372036854775807)) THEN false
		ELSE pg_try_advisory_lock_shared($1::int8) END AS ok
), st AS (
	INSERT INTO {pstate} AS s (kind, hash, token)
	SELECT 1, $2::int8, {fence} FROM g0 WHERE g0.ok AND NOT EXISTS (SELECT 1 FROM {pstate} WHERE kind = 1 AND hash = $2::int8)
	ON CONFLICT (kind, hash) DO UPDATE SET token = s.token
	RETURNING token
), g AS MATERIALIZED (
	SELECT CASE WHEN g0.ok THEN coalesce((SELECT token FROM {pstate} WHERE kind = 1 AND hash = $2::int8), (SELECT token FROM st)) END AS token FROM g0
), w AS (` + sqlRWHoldRow("1") + `
), dq AS (
	DELETE FROM {pqueue} WHERE kind = 1 AND hash = $2::int8 AND owner = $3::bytea AND EXISTS (SELECT 1 FROM g WHERE token IS NOT NULL)
), eq AS (` + sqlRWQueueUp("1", "$5::bool") + `
)
SELECT g.token, CASE WHEN g.token IS NULL THEN (SELECT greatest(ceil(extract(epoch FROM max(h.expires) - clock_timestamp()) * 1000), 0)::int8
	FROM {pheld} h WHERE h.kind = 1 AND h.hash = $2::int8 AND h.mode = 2 AND h.expires > clock_timestamp()) END FROM g`,

		// A write attempt. $4 lease ms, $5 may (false: refused in process,
		// only queue), $6 wait, $7 queue TTL ms. Granted only at the head of
		// the live queue (readers queued before it go first) and if the
		// exclusive lock is free; the token comes from the fence sequence
		// and becomes the key's read token. It purges the key's expired rows
		// and entries. Returns the token (NULL: refused) and, refused, the
		// longest remaining lease of the other holders.
		stRWWrite: `WITH hd AS MATERIALIZED (
	SELECT q.owner FROM ` + sqlRWLiveQueue + ` ORDER BY q.seq, q.owner LIMIT 1
), g AS MATERIALIZED (
	SELECT CASE WHEN NOT $5::bool THEN NULL
		WHEN EXISTS (SELECT 1 FROM hd WHERE owner <> $3::bytea) THEN NULL
		WHEN pg_try_advisory_lock($1::int8) THEN {fence} END AS token
), st AS (
	INSERT INTO {pstate} (kind, hash, token) SELECT 1, $2::int8, g.token FROM g WHERE g.token IS NOT NULL
	ON CONFLICT (kind, hash) DO UPDATE SET token = excluded.token
), w AS (` + sqlRWHoldRow("2") + `
), ph AS (
	DELETE FROM {pheld} WHERE kind = 1 AND hash = $2::int8 AND expires <= clock_timestamp() AND owner <> $3::bytea
), dq AS (
	DELETE FROM {pqueue} WHERE kind = 1 AND hash = $2::int8 AND (
		(owner = $3::bytea AND EXISTS (SELECT 1 FROM g WHERE token IS NOT NULL))
		OR (owner <> $3::bytea AND expires <= clock_timestamp()))
), eq AS (` + sqlRWQueueUp("2", "true") + `
)
SELECT g.token, CASE WHEN g.token IS NULL THEN (SELECT greatest(ceil(extract(epoch FROM max(h.expires) - clock_timestamp()) * 1000), 0)::int8
	FROM {pheld} h WHERE h.kind = 1 AND h.hash = $2::int8 AND h.owner <> $3::bytea AND h.expires > clock_timestamp()) END FROM g`,

		// Release (or, with $8 reap, the end of a lease by the local clock:
		// then the hold stays if its row was extended meanwhile). $4 mode,
		// $5 channel, $6 "<hash>", $7 other holders of this process remain
		// on the session (a reader's release then wakes nobody). It frees
		// the lock, drops the row and the owner's queue entry, and notifies
		// when some process waits for the key (its wait flag is taken) and,
		// for a reader, no holder is left (the exclusive lock is free for an
		// instant). Returns the ms left (kept), 0 (released) or -1 (the lock
		// was not held), and whether it notified.
		stRWRelease: `WITH e AS MATERIALIZED (
	SELECT ceil(extract(epoch FROM expires - clock_timestamp()) * 1000)::int8 AS left_ms
	FROM {pheld} WHERE kind = 1 AND hash = $2::int8 AND owner = $3::bytea AND mode = $4::int8
), k AS MATERIALIZED (
	SELECT $8::bool AND coalesce((SELECT left_ms FROM e), 0) > 0 AS keep
), d AS (
	DELETE FROM {pheld} WHERE kind = 1 AND hash = $2::int8 AND owner = $3::bytea AND mode = $4::int8 AND NOT (SELECT keep FROM k)
), dq AS (
	DELETE FROM {pqueue} WHERE kind = 1 AND hash = $2::int8 AND owner = $3::bytea AND NOT (SELECT keep FROM k)
), u AS MATERIALIZED (
	SELECT CASE WHEN (SELECT keep FROM k) THEN NULL
		WHEN $4::int8 = 1 THEN pg_advisory_unlock_shared($1::int8)
		ELSE pg_advisory_unlock($1::int8) END AS ok
)
SELECT CASE WHEN u.ok IS NULL THEN (SELECT left_ms FROM e) WHEN NOT u.ok THEN -1 ELSE 0 END::int8,
	CASE WHEN NOT coalesce(u.ok, false) THEN NULL
		WHEN $4::int8 = 1 AND $7::bool THEN NULL
		WHEN ` + noWaiter("($2::int8 >> 32)::int4", "($2::int8 & 4294967295)::bit(32)::int4") + ` THEN NULL
		WHEN $4::int8 = 1 AND NOT pg_try_advisory_xact_lock($1::int8) THEN NULL
		ELSE length(pg_notify($5::text, ` + sqlRWWakeNames + `)::text) END::int8
FROM u`,

		// Renew a live row. $4 mode, $5 lease ms.
		stRWExtend: `UPDATE {pheld} SET expires = clock_timestamp() + $5::int8 * interval '1 millisecond'
	WHERE kind = 1 AND hash = $2::int8 AND owner = $3::bytea AND mode = $4::int8 AND expires > clock_timestamp()
		AND $1::int8 IS NOT NULL`,

		// Release by owner from a Backend that does not hold it: drop the
		// live row (the holder's next renewal fails and frees its lock) and
		// withdraw the owner from the queue, waking the waiters that may now
		// go. $4 mode, $5 channel, $6 "<hash>". Returns rows dropped.
		stRWRemote: `WITH d AS (DELETE FROM {pheld} WHERE kind = 1 AND hash = $2::int8 AND owner = $3::bytea AND mode = $4::int8
		AND expires > clock_timestamp() RETURNING 1),
	dq AS (DELETE FROM {pqueue} WHERE kind = 1 AND hash = $2::int8 AND owner = $3::bytea AND $1::int8 IS NOT NULL RETURNING 1)
SELECT (SELECT count(*) FROM d)::int8,
	CASE WHEN NOT EXISTS (SELECT 1 FROM dq) THEN NULL
		ELSE length(pg_notify($5::text, ` + sqlRWWakeNames + `)::text) END::int8`,
	}
	for k, v := range m {
		m[k] = n.expandPattern(v)
	}
	return m
}

// rwKeys returns the key's read/write advisory key and its hash.
func (b *Backend) rwKeys(key string) (lock, p int64) {
	return b.patternLock(kindRW, key), b.hash(key)
}

func rwModeRow(mode driver.RWMode) (int64, error) {
	switch mode {
	case driver.ModeRead:
		return rowRead, nil
	case driver.ModeWrite:
		return rowWrite, nil
	}
	return 0, &driver.ArgError{Arg: "mode", Reason: "neither read nor write"}
}

// runStmt queues one statement on s and waits for its result (bounded by the
// statement timeout); false if the session is dead.
func runStmt(s *session, stmt string, args [][]byte) (result, bool) {
	ch := make(chan result, 1)
	if !s.enqueue(&op{stmt: stmt, args: args, fin: func(r result) { ch <- r }}) {
		return result{}, false
	}
	return await(ch), true
}

// AcquireRW implements lockx.RWBackend: one statement on the key's holder
// session (see the comment at the top of rw.go). A repeat by a holder
// renews its lease; an owner holding the write side gets the read side on
// the same session (downgrade) even while writers wait; one holding the
// read side gets lockx.ErrUpgrade.
func (b *Backend) AcquireRW(ctx context.Context, mode driver.RWMode, req driver.Request) (driver.Result, error) {
	m, err := rwModeRow(mode)
	if err != nil {
		return driver.Result{}, err
	}
	if b.cfg.err != nil {
		return driver.Result{}, b.cfg.err
	}
	name := "acquire " + mode.String()
	if err := backendkit.Ended(ctx, name); err != nil {
		return driver.Result{}, err
	}
	lock, p := b.rwKeys(req.Key)
	flagged := false
	if req.Wait {
		// A waiter notified of releases takes the key's wait flag before
		// its attempt, so that a release after the attempt notifies.
		b.mu.Lock()
		w := b.watcherLocked(p, req.Owner)
		b.mu.Unlock()
		if w != nil && !w.X.flagged {
			if err := b.flag(ctx, p, w); err != nil {
				return driver.Result{}, backendkit.Unavailable(name, err)
			}
		}
		b.mu.Lock()
		flagged = w != nil && w.X.flagged && !w.X.cancelled
		b.mu.Unlock()
	}
	// A refusal decided while the flag was held may answer the retries
	// until a notification names the waiter (refusals.go): any release
	// after it notifies.
	ask := refusal{hash: p, kind: kindRW, mode: int(m), limit: 1, count: 1}
	if flagged {
		if res, ok := b.answerLocally(req, ask); ok {
			return res, nil
		}
	}
	seq, listening := b.refs.mark(b)
	listening = listening && flagged
	for attempt := 0; ; attempt++ {
		res, retry, err := b.acquireRW(ctx, name, m, lock, p, req, flagged)
		if retry && attempt < 3 {
			continue
		}
		if err == nil {
			b.noteAnswer(req, ask, res, seq, listening)
		}
		return res, err
	}
}

func (b *Backend) acquireRW(ctx context.Context, name string, m, lock, p int64, req driver.Request, flagged bool) (driver.Result, bool, error) {
	s, err := b.session(ctx, b.index(p))
	if err != nil {
		return driver.Result{}, false, backendkit.Unavailable(name, err)
	}
	b.mu.Lock()
	sl, err := b.rwTurnLocked(ctx, name, p, m)
	if err != nil {
		b.mu.Unlock()
		return driver.Result{}, false, err
	}
	now := time.Now()
	var mine *hold
	if m == rowRead {
		mine = sl.readers[req.Owner]
	} else if sl.writer != nil && sl.writer.owner == req.Owner {
		mine = sl.writer
	}
	if mine != nil || m == rowWrite && sl.readers[req.Owner] != nil {
		b.rwEndWriteLocked(sl, m)
		b.rwDropIfEmpty(p, sl)
		b.mu.Unlock()
		if mine == nil {
			return driver.Result{}, false, driver.ErrUpgrade
		}
		// A repeat: renew.
		err := b.extendRWHold(ctx, mine, m, req.Lease)
		if err == nil {
			return driver.Result{Acquired: true, Token: mine.token, TTL: req.Lease}, false, nil
		}
		return driver.Result{}, isNotHeld(err), err
	}
	// This process's holds conflict as the server would decide, had they
	// been taken on different sessions.
	how := int64(readTry)
	var localTTL time.Duration
	switch {
	case m == rowRead && sl.writer != nil && sl.writer.owner == req.Owner:
		how = readForce
	case m == rowRead && sl.writer != nil:
		how = readRefuse
		localTTL = sl.writer.remaining(now)
	case m == rowWrite && (sl.writer != nil || len(sl.readers) > 0):
		how = readRefuse
		for _, h := range sl.holds() {
			localTTL = max(localTTL, h.remaining(now))
		}
	}
	if how == readRefuse {
		b.rwEndWriteLocked(sl, m)
	}
	// A waiter refused in process still queues, so that order holds across
	// processes — once it watches: its first, unwatched attempt is followed
	// at once by a watched one.
	if how == readRefuse && !(req.Wait && flagged && (m == rowWrite || req.Fair)) {
		b.rwDropIfEmpty(p, sl)
		b.mu.Unlock()
		return driver.Result{TTL: localTTL}, false, nil
	}
	qttl := ms(b.queueTTL(req.QueueTTL))
	var args [][]byte
	stmt := stRWRead
	if m == rowRead {
		args = [][]byte{i8(lock), i8(p), []byte(req.Owner), i8(ms(req.Lease)), boolean(req.Fair), boolean(req.Wait), i8(qttl), i8(how)}
	} else {
		stmt = stRWWrite
		args = [][]byte{i8(lock), i8(p), []byte(req.Owner), i8(ms(req.Lease)), boolean(how != readRefuse), boolean(req.Wait), i8(qttl)}
	}
	try := how != readRefuse
	if try && m == rowRead {
		sl.flightR++
	}
	ch := make(chan driver.Result, 1)
	o := &op{stmt: stmt, args: args, fin: func(r result) {
		ch <- b.rwGranted(s, p, m, req, try, now, r)
	}}
	if !s.enqueue(o) {
		if try {
			b.rwDoneLocked(sl, m)
		}
		b.rwDropIfEmpty(p, sl)
		b.mu.Unlock()
		return driver.Result{}, true, backendkit.Unavailable(name, errSessionLost)
	}
	b.mu.Unlock()
	res := <-ch
	if res.Acquired || res.TTL >= 0 {
		if how == readRefuse {
			res.TTL = max(res.TTL, localTTL)
		}
		return res, false, nil
	}
	return driver.Result{}, false, backendkit.Unavailable(name, errSessionLost)
}

// rwDoneLocked ends an attempt in flight. Callers hold b.mu.
func (b *Backend) rwDoneLocked(sl *rwSlot, m int64) {
	if m == rowRead {
		sl.flightR--
		if sl.flightR == 0 && sl.drained != nil {
			close(sl.drained)
			sl.drained = nil
		}
	} else {
		b.rwEndWriteLocked(sl, rowWrite)
	}
}

// rwEndWriteLocked ends a write attempt's turn (m is its mode) and lets
// the local attempts waiting for it go. Callers hold b.mu.
func (b *Backend) rwEndWriteLocked(sl *rwSlot, m int64) {
	if m != rowWrite || !sl.flightW {
		return
	}
	sl.flightW = false
	if sl.wdone != nil {
		close(sl.wdone)
		sl.wdone = nil
	}
}

// rwTurnLocked waits until an attempt of mode m may be decided in process:
// the server cannot keep apart two owners of one session, so a write
// attempt goes out alone — it waits for the read attempts in flight, and
// attempts arriving meanwhile wait for its outcome (one statement's time)
// rather than being refused for it. A write attempt returns with its turn
// (flightW) taken. Callers hold b.mu, which is released while waiting.
func (b *Backend) rwTurnLocked(ctx context.Context, name string, p, m int64) (*rwSlot, error) {
	for {
		if b.closed {
			return nil, backendkit.Unavailable(name, errClosed)
		}
		sl := b.rwSlotLocked(p)
		var wait chan struct{}
		switch {
		case sl.flightW:
			wait = sl.wdone
		case m == rowWrite && sl.flightR > 0 && sl.writer == nil && len(sl.readers) == 0:
			sl.flightW = true
			sl.wdone = make(chan struct{})
			if sl.drained == nil {
				sl.drained = make(chan struct{})
			}
			err := b.waitUnlocked(ctx, name, sl.drained)
			if err == nil && b.closed {
				err = backendkit.Unavailable(name, errClosed)
			}
			if err != nil {
				b.rwEndWriteLocked(sl, rowWrite)
				b.rwDropIfEmpty(p, sl)
				return nil, err
			}
			return sl, nil
		case m == rowWrite:
			sl.flightW = true
			sl.wdone = make(chan struct{})
			return sl, nil
		default:
			return sl, nil
		}
		if err := b.waitUnlocked(ctx, name, wait); err != nil {
			return nil, err
		}
	}
}

// waitUnlocked waits for ch to close, or ctx to end, with b.mu released.
// Callers hold b.mu.
func (b *Backend) waitUnlocked(ctx context.Context, name string, ch <-chan struct{}) error {
	b.mu.Unlock()
	defer b.mu.Lock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return backendkit.Ended(ctx, name)
	}
}

// rwGranted records the outcome of an attempt on the session's goroutine.
// A failed statement may have taken the lock (a session lock outlives the
// statement's error) and other owners of this process may hold the key on
// the session: only ending the session frees it for sure. A result with a
// negative TTL means "failed".
func (b *Backend) rwGranted(s *session, p, m int64, req driver.Request, try bool, start time.Time, r result) driver.Result {
	b.mu.Lock()
	defer b.mu.Unlock()
	sl := b.rwSlotLocked(p)
	if try {
		b.rwDoneLocked(sl, m)
	}
	defer b.rwDropIfEmpty(p, sl)
	switch {
	case r.err != nil:
		if try && !s.isDead() {
			s.kill()
		}
		return driver.Result{TTL: -1}
	case r.isNull(0):
		return driver.Result{TTL: time.Duration(r.val(1)) * time.Millisecond}
	case b.closed || s.isDead():
		return driver.Result{TTL: -1}
	}
	h := &hold{hash: p, key: req.Key, owner: req.Owner, token: driver.Token(r.val(0)), shared: m == rowRead,
		sess: s, deadline: start.Add(req.Lease)}
	h.lease.Arm(req.Lease, func() { b.rwExpire(h) })
	if m == rowRead {
		sl.readers[req.Owner] = h
	} else {
		sl.writer = h
	}
	return driver.Result{Acquired: true, Token: h.token, TTL: req.Lease}
}

// rwLocalHold returns this process's live mode hold of owner on key.
func (b *Backend) rwLocalHold(p, m int64, key string, owner driver.Owner) *hold {
	b.mu.Lock()
	defer b.mu.Unlock()
	sl := b.rws[p]
	if sl == nil {
		return nil
	}
	h := sl.writer
	if m == rowRead {
		h = sl.readers[owner]
	}
	if h == nil || h.owner != owner || h.key != key || h.gone {
		return nil
	}
	return h
}

// ExtendRW implements lockx.RWBackend: one statement renewing the hold's
// row. The holder's Backend frees the lock at once when the row is gone
// (force-released, or its lease ended by the server's clock).
func (b *Backend) ExtendRW(ctx context.Context, mode driver.RWMode, key string, owner driver.Owner, lease time.Duration) error {
	m, err := rwModeRow(mode)
	if err != nil {
		return err
	}
	lock, p := b.rwKeys(key)
	if h := b.rwLocalHold(p, m, key, owner); h != nil {
		return b.extendRWHold(ctx, h, m, lease)
	}
	s, err := b.session(ctx, b.index(p))
	if err != nil {
		return backendkit.Unavailable("extend "+mode.String(), err)
	}
	r, ok := runStmt(s, stRWExtend, [][]byte{i8(lock), i8(p), []byte(owner), i8(m), i8(ms(lease))})
	switch {
	case !ok:
		return backendkit.Unavailable("extend "+mode.String(), errSessionLost)
	case r.err != nil:
		return backendkit.Unavailable("extend "+mode.String(), usageError(r.err, b.names))
	case r.rows == 0:
		return driver.ErrNotHeld
	}
	return nil
}

func (b *Backend) extendRWHold(ctx context.Context, h *hold, m int64, lease time.Duration) error {
	name := "extend " + driver.RWMode(m).String()
	lock := b.patternLock(kindRW, h.key)
	start := time.Now()
	ch := make(chan result, 1)
	if !h.sess.enqueue(&op{stmt: stRWExtend, args: [][]byte{i8(lock), i8(h.hash), []byte(h.owner), i8(m), i8(ms(lease))},
		fin: func(r result) { ch <- r }}) {
		return driver.ErrNotHeld // the session died with the lock
	}
	var r result
	select {
	case r = <-ch:
	case <-ctx.Done():
		return backendkit.Ended(ctx, name)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case h.gone:
		return driver.ErrNotHeld
	case r.err != nil:
		return backendkit.Unavailable(name, usageError(r.err, b.names))
	case r.rows == 0:
		// Force-released, or its lease ended by the server's clock: free
		// the lock now.
		b.rwEndLocked(h, m)
		return driver.ErrNotHeld
	}
	h.deadline = start.Add(lease)
	h.lease.Reset(lease)
	return nil
}

// rwEndLocked reports h lost, forgets it and frees its lock. Callers hold
// b.mu.
func (b *Backend) rwEndLocked(h *hold, m int64) {
	b.lose(h)
	if h.reaping {
		h.unlockAfterReap = true // the reap's outcome decides (rwExpire)
		return
	}
	others := b.rwForgetLocked(h, m)
	b.rwReleaseOp(h, m, others, false, nil)
}

// rwForgetLocked removes h from its slot and reports whether other holds
// or attempts of the key remain in this process. Callers hold b.mu.
func (b *Backend) rwForgetLocked(h *hold, m int64) bool {
	sl := b.rws[h.hash]
	if sl == nil {
		return false
	}
	if m == rowRead && sl.readers[h.owner] == h {
		delete(sl.readers, h.owner)
	} else if m == rowWrite && sl.writer == h {
		sl.writer = nil
	}
	others := len(sl.readers) > 0 || sl.writer != nil
	b.rwDropIfEmpty(h.hash, sl)
	return others
}

// rwReleaseOp queues the release of h on its session; fin gets the result
// (nil: ignored). Callers hold b.mu.
func (b *Backend) rwReleaseOp(h *hold, m int64, others, reap bool, fin func(result)) bool {
	if fin == nil {
		s := h.sess
		fin = func(r result) {
			if r.err != nil && !s.isDead() {
				s.kill()
			}
		}
	}
	lock := b.patternLock(kindRW, h.key)
	return h.sess.enqueue(&op{stmt: stRWRelease, args: [][]byte{i8(lock), i8(h.hash), []byte(h.owner), i8(m),
		[]byte(b.names.channel), b.payload(h.hash), boolean(others), boolean(reap)}, fin: fin})
}

// ReleaseRW implements lockx.RWBackend: one statement. The holder's Backend
// frees its lock; any other releases by owner through the rows (a waiter
// withdrawing, or a force-release the holder notices at its next renewal).
func (b *Backend) ReleaseRW(ctx context.Context, mode driver.RWMode, key string, owner driver.Owner) error {
	m, err := rwModeRow(mode)
	if err != nil {
		return err
	}
	name := "release " + mode.String()
	lock, p := b.rwKeys(key)
	b.refs.forget(hex.EncodeToString([]byte(owner)))
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return backendkit.Unavailable(name, errClosed)
	}
	var h *hold
	if sl := b.rws[p]; sl != nil {
		h = sl.writer
		if m == rowRead {
			h = sl.readers[owner]
		}
	}
	if h != nil && h.owner == owner && h.key == key && !h.gone {
		h.gone = true
		h.lease.Stop()
		h.loss.Drop()
		if h.reaping {
			// Its lease timer's unlock is in flight on the session; the
			// reap's outcome decides (rwExpire), so that the lock is
			// unlocked once.
			h.unlockAfterReap = true
			b.mu.Unlock()
			return nil
		}
		others := b.rwForgetLocked(h, m)
		ch := make(chan result, 1)
		s := h.sess
		ok := b.rwReleaseOp(h, m, others, false, func(r result) { ch <- r })
		b.mu.Unlock()
		if ok {
			if r := await(ch); r.err != nil && !s.isDead() {
				s.kill() // whether the unlock ran is unknown
			}
		}
		return nil
	}
	b.mu.Unlock()
	s, err := b.session(ctx, b.index(p))
	if err != nil {
		return backendkit.Unavailable(name, err)
	}
	r, ok := runStmt(s, stRWRemote, [][]byte{i8(lock), i8(p), []byte(owner), i8(m), []byte(b.names.channel), b.payload(p)})
	switch {
	case !ok:
		return backendkit.Unavailable(name, errSessionLost)
	case r.err != nil:
		return backendkit.Unavailable(name, usageError(r.err, b.names))
	case r.val(0) == 0:
		return driver.ErrNotHeld
	}
	return nil
}

// rwExpire is a hold's lease timer: the holder's Backend frees the lock at
// the lease's end by the server's clock, keeping it if the row was extended
// through another Backend meanwhile.
func (b *Backend) rwExpire(h *hold) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.dueLocked(h) {
		return
	}
	m := int64(rowWrite)
	if h.shared {
		m = rowRead
	}
	h.reaping = true
	sl := b.rws[h.hash]
	others := sl != nil && (len(sl.readers) > 1 || sl.writer != nil && sl.writer != h)
	b.rwReleaseOp(h, m, others, true, func(r result) {
		b.mu.Lock()
		defer b.mu.Unlock()
		h.reaping = false
		switch {
		case r.err != nil:
			// Whether it unlocked is unknown: only ending the session
			// frees the lock without freeing another owner's.
			if !h.sess.isDead() {
				h.sess.kill()
			}
		case r.val(0) > 0 && h.unlockAfterReap:
			// Kept by the server's clock, but released or revoked here
			// meanwhile: its unlock goes out now.
			b.rwReleaseOp(h, m, b.rwForgetLocked(h, m), false, nil)
		case r.val(0) > 0 && !h.gone: // extended through another Backend
			d := time.Duration(r.val(0)) * time.Millisecond
			h.deadline = time.Now().Add(d)
			h.lease.Reset(d)
		case r.val(0) > 0: // lost with its session, or closed
		default:
			b.lose(h)
			b.rwForgetLocked(h, m)
		}
	})
}

// rwSessionLostLocked reports the read/write holds on a dead session lost
// and returns one per key, so that other processes' waiters hear of it.
// Callers hold b.mu.
func (b *Backend) rwSessionLostLocked(s *session) (n int, announce []*hold) {
	for p, sl := range b.rws {
		var one *hold
		for _, h := range sl.holds() {
			if h.sess != s {
				continue
			}
			b.lose(h)
			n++
			one = h
			if h.shared {
				delete(sl.readers, h.owner)
			} else {
				sl.writer = nil
			}
		}
		if one != nil {
			announce = append(announce, one)
		}
		b.rwDropIfEmpty(p, sl)
	}
	return n, announce
}

// rwCloseLocked stops the timers of every read/write hold. Callers hold
// b.mu.
func (b *Backend) rwCloseLocked() {
	for _, sl := range b.rws {
		for _, h := range sl.holds() {
			h.gone = true
			h.lease.Stop()
		}
	}
	b.rws = nil
}

func (sl *rwSlot) holds() []*hold { return holdsOf(sl.writer, sl.readers) }

// holdsOf lists an exclusive hold (if any) and shared ones.
func holdsOf(excl *hold, shared map[driver.Owner]*hold) []*hold {
	var hs []*hold
	if excl != nil {
		hs = append(hs, excl)
	}
	for _, h := range shared {
		hs = append(hs, h)
	}
	return hs
}

// dueLocked reports whether h's lease timer finds it due: not ended or
// being reaped, and its deadline passed (else the timer is re-armed).
// Callers hold b.mu.
func (b *Backend) dueLocked(h *hold) bool {
	if h.gone || h.reaping || b.closed {
		return false
	}
	return h.lease.Expired(h.deadline)
}
