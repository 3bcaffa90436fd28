package pglock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/internal/backendkit"
)

// Backend is a lockx.Backend on PostgreSQL session advisory locks. It also
// implements lockx.Notifier (LISTEN/NOTIFY wake-up) and lockx.BatchExtender.
// Create one per process and pool with New; it is safe for concurrent use.
type Backend struct {
	pool  *pgxpool.Pool
	cfg   config
	names names
	stmts map[string]string

	// sessions are the holder sessions (the first cfg.sessions, chosen by
	// key hash) followed by the wait sessions.
	sessions []sessionSlot
	lst      *listener
	refs     refusals // refused pattern waiters answered locally (refusals.go)
	sem      semState // semaphore waiters and combined decisions (sem_batch.go)
	// fairSent counts the statements fair attempts sent (tries and queue
	// refreshes): with a working wake-up, a few per handoff.
	fairSent atomic.Int64

	mu      sync.Mutex
	slots   map[int64]*slot
	rws     map[int64]*rwSlot                      // read/write keys by hash (rw.go)
	watch   backendkit.Registry[int64, watchState] // by key hash
	refused map[int64]time.Time                    // keys refused lately (markRefused)
	closed  bool
	// g runs the sessions, the listener, prewarms, announcements and loss
	// callbacks; Close cancels it (with b.mu held, as it sets closed) and
	// waits for them.
	g backendkit.Group
}

var (
	_ driver.Backend       = (*Backend)(nil)
	_ driver.Notifier      = (*Backend)(nil)
	_ driver.BatchExtender = (*Backend)(nil)
)

// sessionSlot is one of the Backend's fixed holder sessions, connected on
// demand and replaced when it dies.
type sessionSlot struct {
	mu       sync.Mutex
	cur      atomic.Pointer[session]
	failedAt time.Time
	failErr  error
	warming  atomic.Bool // a prewarm of this slot is under way
}

// slot is the in-process state of one advisory-lock key (hash): who of this
// process holds it, or is taking it. At most one exclusive hold, or any
// number of shared holds of one key, exist per hash: advisory locks are
// reentrant per session, so the server cannot tell two owners of one
// process apart — this map does.
type slot struct {
	excl      *hold
	shared    map[driver.Owner]*hold
	sharedKey string
	sharedTok driver.Token
	sess      *session // session that holds the server-side lock
	pending   *pending // an acquisition in flight
}

func (sl *slot) empty() bool { return sl.excl == nil && len(sl.shared) == 0 && sl.pending == nil }

// hold is one owner's grant of a key.
type hold struct {
	hash     int64
	key      string
	owner    driver.Owner
	token    driver.Token
	shared   bool
	sess     *session
	deadline time.Time // local clock; the row's expires (server clock) is at or after it
	lease    backendkit.Lease
	gone     bool // released, expired or lost
	reaping  bool
	// unlockAfterReap: a read/write hold released or revoked while its reap
	// was in flight. The reap's statement decides alone: it unlocks, or
	// keeps the hold (extended through another Backend) and then the
	// unlock goes out after it. A second unlock would free another owner's
	// reference, advisory locks counting per session.
	unlockAfterReap bool
	loss            backendkit.Losses // NotifyLoss callbacks, guarded by b.mu
	// published: the holder's row is written, or its write is queued on
	// sess (every later statement of the hold runs after it). pub is the
	// timer that will queue it (publish.go).
	published bool
	pub       *time.Timer
	since     time.Time // the grant's start, for the row's acquired time
}

func (h *hold) remaining(now time.Time) time.Duration { return max(h.deadline.Sub(now), 0) }

// pending is an acquisition whose statement is in flight.
type pending struct {
	owner     driver.Owner
	done      chan struct{}
	finished  bool
	abandoned bool // the caller stopped waiting: give a late grant back
	yield     bool // a wait session refused because fair waiters queue
	waited    bool // the statement ran on a wait session
	sliced    bool // its wait slice ended without a grant
	// behind are the owners this process refused because this attempt was
	// in flight: they are woken when it ends without a grant, as nothing
	// else would wake them (see attempt and granted).
	behind []driver.Owner
	res    driver.Result
	err    error
}

// New returns a Backend that takes its connections from pool: up to
// WithSessions holder sessions (default 2, never more than half the pool's
// MaxConns) plus one listener session while anyone waits. Its
// WithWaitSessions wait sessions (default 1) come from the pool while they
// fit in that half with the holder sessions; the others are dedicated
// connections the Backend opens itself with the pool's connection config
// (and its BeforeConnect and AfterConnect hooks), outside MaxConns, so a
// pool of pgxpool's default size still hands a hot key over inside the
// server. The pool must allow the holder and listener sessions beyond what
// the application needs itself.
// Nothing is connected until first use; the schema is created then (see
// Migrate, WithoutAutoMigrate).
//
// Close the Backend (or the lockx.Client over it) before the pool.
func New(pool *pgxpool.Pool, opts ...Option) *Backend {
	cfg := newConfig(opts)
	if pool == nil && cfg.err == nil {
		cfg.err = fmt.Errorf("pglock: %w", &driver.ArgError{Arg: "pool", Reason: "nil"})
	}
	if pool != nil {
		// Holder sessions never take more than half the pool: the listener
		// and the application need connections too. Wait sessions take
		// what is left of that half; the rest are dedicated connections.
		half := int(pool.Config().MaxConns) / 2
		cfg.sessions = max(1, min(cfg.sessions, half))
		cfg.poolWait = max(0, min(cfg.waitSessions, half-cfg.sessions))
	}
	n := newNames(cfg.schema)
	b := &Backend{
		pool:     pool,
		cfg:      cfg,
		names:    n,
		stmts:    n.statements(cfg.publishDelay > 0),
		sessions: make([]sessionSlot, cfg.sessions+cfg.waitSessions),
		slots:    make(map[int64]*slot),
		refused:  make(map[int64]time.Time),
	}
	for name, sql := range n.rwStatements() {
		b.stmts[name] = sql
	}
	b.lst = newListener(b)
	return b
}

func (b *Backend) hash(key string) int64 { return b.cfg.id(b.cfg.namespace, key) }

func (b *Backend) index(hash int64) int { return int(uint64(hash) % uint64(b.cfg.sessions)) }

func (b *Backend) payload(hash int64) []byte { return []byte(strconv.FormatInt(hash, 10)) }

// session returns the live holder session idx, connecting it if needed. A
// failed connection attempt is remembered for a moment so that a server
// that is down fails every caller fast.
func (b *Backend) session(ctx context.Context, idx int) (*session, error) {
	if b.cfg.err != nil {
		return nil, b.cfg.err
	}
	ss := &b.sessions[idx]
	if s := ss.cur.Load(); s != nil && !s.isDead() {
		return s, nil
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s := ss.cur.Load(); s != nil && !s.isDead() {
		return s, nil
	}
	select {
	case <-b.g.Done():
		return nil, errClosed
	default:
	}
	if ss.failErr != nil && time.Since(ss.failedAt) < 200*time.Millisecond {
		return nil, ss.failErr
	}
	s, err := b.connect(ctx, idx)
	if err != nil {
		ss.failedAt, ss.failErr = time.Now(), err
		return nil, err
	}
	ss.failErr = nil
	b.mu.Lock()
	if b.closed || !b.g.Go(s.run) {
		b.mu.Unlock()
		s.closeConn()
		return nil, errClosed
	}
	ss.cur.Store(s)
	b.mu.Unlock()
	return s, nil
}

func (b *Backend) connect(ctx context.Context, idx int) (*session, error) {
	ctx, cancel := context.WithTimeout(ctx, b.cfg.connectTimeout)
	defer cancel()
	conn, release, err := b.dial(ctx, idx)
	if err != nil {
		return nil, fmt.Errorf("pglock: connect: %w", err)
	}
	pg := conn.PgConn()
	if err := checkPooler(ctx, pg, &b.pool.Config().ConnConfig.Config); err != nil {
		_ = pg.Close(context.Background())
		release()
		return nil, err
	}
	err = b.prepare(ctx, conn)
	if err != nil && isMissingSchema(err) && b.cfg.autoMigrate {
		if err = migrate(ctx, conn, b.cfg.schema); err == nil {
			// Statements prepared before the failing one persist (prepared
			// statements are not transactional). This connection never goes
			// back to the pool open, so dropping them all is safe.
			if err = pg.Exec(ctx, "DEALLOCATE ALL").Close(); err == nil {
				err = b.prepare(ctx, conn)
			}
		}
	}
	if err == nil {
		err = b.guardFence(ctx, conn)
		if err != nil && isMissingSchema(err) && b.cfg.autoMigrate { // a schema from before lockx_epoch
			if err = migrate(ctx, conn, b.cfg.schema); err == nil {
				err = b.guardFence(ctx, conn)
			}
		}
	}
	if err != nil {
		_ = pg.Close(context.Background())
		release()
		if isMissingSchema(err) {
			return nil, fmt.Errorf("pglock: schema %s is missing: run pglock.Migrate: %w", b.names.schema, err)
		}
		return nil, usageError(err, b.names)
	}
	s := &session{b: b, idx: idx, release: release, pg: pg, pid: pg.PID(), wake: make(chan struct{}, 1), waiting: idx >= b.cfg.sessions}
	s.undriven = sync.NewCond(&s.mu)
	return s, nil
}

// dial opens session idx's connection: from the pool for the holder
// sessions and the wait sessions that fit in it (see New), otherwise a
// dedicated connection made as the pool would make it. release gives a
// pool connection back once the caller has closed it (the pool then
// destroys it); for a dedicated one closing is all.
func (b *Backend) dial(ctx context.Context, idx int) (conn *pgx.Conn, release func(), err error) {
	if idx < b.cfg.sessions+b.cfg.poolWait {
		c, err := b.pool.Acquire(ctx)
		if err != nil {
			return nil, nil, err
		}
		return c.Conn(), c.Release, nil
	}
	pc := b.pool.Config()
	cc := pc.ConnConfig.Copy()
	if pc.BeforeConnect != nil {
		if err := pc.BeforeConnect(ctx, cc); err != nil {
			return nil, nil, err
		}
	}
	conn, err = pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, nil, err
	}
	if pc.AfterConnect != nil {
		if err := pc.AfterConnect(ctx, conn); err != nil {
			_ = conn.Close(context.Background())
			return nil, nil, err
		}
	}
	return conn, func() {}, nil
}

// prepare prepares every statement in one pipeline (one round trip).
func (b *Backend) prepare(ctx context.Context, conn *pgx.Conn) error {
	p := conn.PgConn().StartPipeline(ctx)
	for name, sql := range b.stmts {
		p.SendPrepare(name, sql, nil)
	}
	if err := p.Sync(); err != nil {
		_ = p.Close()
		return err
	}
	var first error
	for range len(b.stmts) + 1 {
		if _, err := p.GetResults(); err != nil && first == nil {
			first = err
		}
	}
	if err := p.Close(); err != nil && first == nil {
		first = err
	}
	return first
}

// Connect connects every holder session and the listener session now —
// creating the schema if needed — instead of on first use, and reports the
// first failure. Use it at start-up to fail fast on a wrong address or
// missing rights, and so that the first waiter does not wait for a new
// connection.
func (b *Backend) Connect(ctx context.Context) error {
	for i := range b.sessions {
		if _, err := b.session(ctx, i); err != nil {
			return backendkit.Unavailable("connect", err)
		}
	}
	if err := b.lst.warm(ctx); err != nil {
		return backendkit.Unavailable("connect", err)
	}
	return nil
}

// prewarm connects session idx in the background, so that a waiter's
// first attempt need not wait for it after its Watch. At most one prewarm
// per session runs at a time.
func (b *Backend) prewarm(idx int) {
	ss := &b.sessions[idx]
	if s := ss.cur.Load(); s != nil && !s.isDead() {
		return
	}
	if !ss.warming.CompareAndSwap(false, true) {
		return
	}
	b.mu.Lock()
	started := !b.closed && b.g.Go(func() {
		defer ss.warming.Store(false)
		_, _ = b.session(b.g.Context(), idx) // Close ends a slow connect
	})
	b.mu.Unlock()
	if !started {
		ss.warming.Store(false)
	}
}

// prewarmWait connects the wait sessions in the background.
func (b *Backend) prewarmWait() {
	for i := b.cfg.sessions; i < len(b.sessions); i++ {
		b.prewarm(i)
	}
}

// Close frees every lock still held through the Backend, stops its
// goroutines and closes its connections (they leave the pool). It does not
// close the pool. Close is idempotent.
func (b *Backend) Close() error {
	if !b.g.Shut(&b.mu, func() {
		b.closed = true
		b.g.Cancel()
		for _, sl := range b.slots {
			for _, h := range sl.holds() {
				h.gone = true
				h.lease.Stop()
			}
		}
		b.slots = make(map[int64]*slot)
		b.rwCloseLocked()
	}) {
		return nil
	}
	b.lst.stop()
	b.g.Wait()
	return nil
}

func (sl *slot) holds() []*hold { return holdsOf(sl.excl, sl.shared) }

// dropIfEmpty forgets a slot nobody uses. Callers hold b.mu.
func (b *Backend) dropIfEmpty(hash int64, sl *slot) {
	if sl.empty() && b.slots[hash] == sl {
		delete(b.slots, hash)
	}
}

// lose marks h lost and tells whoever asked (NotifyLoss). Callers hold b.mu.
func (b *Backend) lose(h *hold) {
	if h.gone {
		return
	}
	h.gone = true
	h.lease.Stop()
	h.stopPublish()
	h.loss.Fire(&b.g)
}

// sessionLost reports every lock on a dead session lost and wakes the local
// waiters of those keys: the server freed the locks with the session.
func (b *Backend) sessionLost(s *session, cause error) {
	b.mu.Lock()
	n := 0
	var lost []*hold
	for hash, sl := range b.slots {
		if sl.sess != s {
			continue
		}
		for _, h := range sl.holds() {
			b.lose(h)
			n++
			if !h.shared {
				lost = append(lost, h)
			}
		}
		sl.excl, sl.shared = nil, nil
		b.dropIfEmpty(hash, sl)
		b.wakeLocked(hash, "")
	}
	rn, rlost := b.rwSessionLostLocked(s)
	n += rn
	lost = append(lost, rlost...)
	if len(lost) > 0 && !b.closed {
		b.g.Go(func() { b.announceLost(s.idx, lost) })
	}
	b.mu.Unlock()
	if l := b.cfg.logger; l != nil && !errors.Is(cause, errClosed) {
		l.Warn("pglock: holder session lost", "pid", s.pid, "locks", n, "err", cause)
	}
}

// announceLost tells other processes, through a new session, that the
// locks of a dead session are free: nothing else would wake their waiters
// before their backoff ends.
func (b *Backend) announceLost(idx int, lost []*hold) {
	ctx, cancel := context.WithTimeout(b.g.Context(), b.cfg.connectTimeout) // Close ends it
	defer cancel()
	s, err := b.session(ctx, idx)
	if err != nil {
		return
	}
	ops := make([]*op, len(lost))
	for i, h := range lost {
		w1, w2 := waitFlag(h.hash)
		ops[i] = &op{stmt: stLost, args: [][]byte{i8(h.hash), []byte(h.owner), i4(w1), i4(w2), []byte(b.names.channel), b.payload(h.hash)},
			fin: func(result) {}}
	}
	s.enqueue(ops...)
}

// await waits for an op's result, bounded by the statement timeout (the
// statement itself is, too) rather than by a caller's context.
func await(ch <-chan result) result { return <-ch }

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
