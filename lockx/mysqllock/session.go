package mysqllock

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/internal/backendkit"
)

// Backend is the session-lock backend (New): GET_LOCK named locks on a few
// pinned connections, a fence table for tokens, leases kept by the Backend,
// loss detection by health check. It implements driver.Backend and
// driver.Notifier and is safe for concurrent use.
type Backend struct {
	db    *sql.DB
	cfg   config
	t     tables
	mig   migrator
	hub   *hub
	poll  *poller
	slots []*slot

	grantSQL, refusedSQL, enqueueSQL, dequeueSQL, extendSQL, checkSQL, forceSQL, ttlSQL string

	// g runs the health check and loss callbacks; its Shut, under mu,
	// marks the Backend closed (g.Closed).
	g       backendkit.Group
	mu      sync.Mutex
	started bool
}

// slot is one pinned holder session. mu serializes everything done on the
// session and guards the bookkeeping of the locks on it.
type slot struct {
	mu       sync.Mutex
	conn     *sql.Conn // nil until first use and after the session died
	grants   map[string]*grant
	enqueued map[string]map[driver.Owner]bool // fair-queue entries made through this slot
	lastOK   time.Time
}

type grant struct {
	key     string
	owner   driver.Owner
	token   driver.Token
	expires time.Time // local clock
	fair    bool
	lease   backendkit.Lease
	loss    backendkit.Losses // NotifyLoss callbacks, guarded by the slot's mu
}

// errClosed is the cause of every call after Close.
var errClosed = fmt.Errorf("mysqllock: backend closed: %w", driver.ErrClosed)

var (
	_ driver.Backend      = (*Backend)(nil)
	_ driver.Notifier     = (*Backend)(nil)
	_ driver.LossNotifier = (*Backend)(nil)
)

// NotifyLoss implements driver.LossNotifier: fn runs (on its own goroutine)
// when owner's lock on key is lost without a Release — its session died
// (seen by the health check within about one WithHealthInterval), its
// lease ran out, or it was found force-released. If owner holds no such
// lock here, fn runs at once. stop cancels the registration.
func (b *Backend) NotifyLoss(key string, owner driver.Owner, fn func()) (stop func()) {
	name := b.t.lockName(key)
	s := b.slotOf(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.grants[name]
	if g == nil || g.owner != owner || g.key != key {
		b.g.Go(fn)
		return func() {}
	}
	return g.loss.Add(&s.mu, fn)
}

// New returns a session-lock Backend over db. It pins at most WithSessions
// connections of db (opened on first use) and leaves the rest to the pool;
// it never closes db. Close the lockx.Client (and with it the Backend)
// before db.
func New(db *sql.DB, opts ...Option) *Backend {
	cfg := newConfig(opts)
	t := newTables(cfg.prefix)
	b := &Backend{db: db, cfg: cfg, t: t, hub: &hub{}}
	b.slots = make([]*slot, cfg.sessions)
	for i := range b.slots {
		b.slots[i] = &slot{grants: map[string]*grant{}, enqueued: map[string]map[driver.Owner]bool{}}
	}
	b.poll = newPoller(b.hub, cfg.poll, b.checkFree)
	// The grant is one statement: GET_LOCK only when no fair waiter is
	// ahead (CASE fixes the order of evaluation), and only if it succeeds
	// the REPLACE of the name's row, whose AUTO_INCREMENT column draws the
	// fencing token in the same statement and transaction.
	b.grantSQL = "REPLACE INTO " + t.fence + " (name, k, owner, expires, conn) SELECT ?, ?, ?, NOW(6) + INTERVAL ? MICROSECOND, CONNECTION_ID() FROM DUAL" +
		" WHERE (CASE WHEN " + t.queueOK() + " THEN GET_LOCK(?, 0) ELSE 0 END) = 1"
	b.refusedSQL = "SELECT GREATEST(TIMESTAMPDIFF(MICROSECOND, NOW(6), expires), 0) FROM " + t.fence + " WHERE name = ? AND conn = IS_USED_LOCK(name)"
	b.enqueueSQL = "INSERT INTO " + t.queue + " (name, owner, expires) VALUES (?, ?, NOW(6) + INTERVAL ? MICROSECOND) ON DUPLICATE KEY UPDATE expires = VALUES(expires)"
	b.dequeueSQL = "DELETE FROM " + t.queue + " WHERE name = ? AND owner = ?"
	b.extendSQL = "UPDATE " + t.fence + " SET expires = NOW(6) + INTERVAL ? MICROSECOND WHERE name = ? AND owner = ? AND token = ?"
	b.checkSQL = "SELECT COUNT(*) FROM " + t.fence + " WHERE name = ? AND owner = ? AND token = ?"
	b.forceSQL = "DELETE FROM " + t.fence + " WHERE name = ? AND owner = ? AND conn = IS_USED_LOCK(name)"
	b.ttlSQL = "SELECT GREATEST(TIMESTAMPDIFF(MICROSECOND, NOW(6), expires), 0) FROM " + t.fence + " WHERE name = ? AND owner = ? AND conn = IS_USED_LOCK(name)"
	return b
}

func (b *Backend) slotOf(name string) *slot {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return b.slots[h.Sum32()%uint32(len(b.slots))]
}

// stmtCtx is the context of statements on holder sessions: never the
// caller's, whose cancellation would make the driver close the session
// and free every lock on it.
func (b *Backend) stmtCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), b.cfg.stmtTimeout)
}

func (b *Backend) ready(ctx context.Context) error {
	if b.cfg.err != nil {
		return b.cfg.err
	}
	if b.g.Closed() {
		return driver.Unavailable("mysqllock", errClosed)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return b.mig.ensure(ctx, &b.cfg, b.db, b.t)
}

// connect pins a session for s. Callers hold s.mu.
func (b *Backend) connect(ctx context.Context, s *slot) error {
	if s.conn != nil {
		return nil
	}
	c, err := b.db.Conn(ctx)
	if err != nil {
		return driver.Unavailable("connect", err)
	}
	s.conn = c
	s.lastOK = time.Now()
	b.mu.Lock()
	if b.g.Closed() { // Close ran concurrently: do not leak the session
		b.mu.Unlock()
		discard(c)
		s.conn = nil
		return driver.Unavailable("connect", errClosed)
	}
	if !b.started {
		b.started = true // the health check runs from the first pinned session on
		b.g.Go(b.healthLoop)
	}
	b.mu.Unlock()
	return nil
}

// kill drops a dead (or suspect) session: it closes it, which makes the
// server free its locks, forgets the grants on it and wakes their waiters.
// The next use of the slot pins a new session. Callers hold s.mu.
func (b *Backend) kill(s *slot) {
	if s.conn != nil {
		discard(s.conn)
		s.conn = nil
	}
	for name, g := range s.grants {
		g.lease.Stop()
		delete(s.grants, name)
		g.loss.Fire(&b.g)
		b.hub.wake(name)
	}
	s.enqueued = map[string]map[driver.Owner]bool{}
}

// fail classifies err from a statement on s's session.
func (b *Backend) fail(s *slot, op string, err error) error {
	if connDead(err) {
		b.kill(s)
	}
	return driver.Unavailable(op, err)
}

// Acquire implements driver.Backend.
func (b *Backend) Acquire(ctx context.Context, req driver.Request) (driver.Result, error) {
	if err := b.ready(ctx); err != nil {
		return driver.Result{}, err
	}
	name := b.t.lockName(req.Key)
	s := b.slotOf(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if g := s.grants[name]; g != nil {
		if !now.Before(g.expires) {
			b.expireLocked(s, name, g)
		} else if g.owner == req.Owner && g.key == req.Key {
			if err := b.extendLocked(s, name, g, req.Lease); err != nil {
				if errors.Is(err, driver.ErrNotHeld) {
					return driver.Result{}, nil
				}
				return driver.Result{}, err
			}
			return driver.Result{Acquired: true, Token: g.token, TTL: req.Lease}, nil
		} else {
			// Another owner of this process holds it on this very session:
			// refused without asking GET_LOCK, which is reentrant per session.
			if req.Fair && req.Wait {
				if err := b.enqueueLocked(ctx, s, name, req); err != nil {
					return driver.Result{}, err
				}
			}
			return driver.Result{TTL: g.expires.Sub(now)}, nil
		}
	}
	if err := b.connect(ctx, s); err != nil {
		return driver.Result{}, err
	}
	sctx, cancel := b.stmtCtx()
	defer cancel()
	o := string(req.Owner)
	res, err := s.conn.ExecContext(sctx, b.grantSQL, name, truncKey(req.Key), o, micros(req.Lease), name, o, name, o, name)
	if err != nil {
		if !connDead(err) {
			b.releaseName(s, name) // GET_LOCK may have succeeded before the error
		}
		return driver.Result{}, b.fail(s, "acquire", err)
	}
	s.lastOK = time.Now()
	if n, _ := res.RowsAffected(); n == 0 {
		var ttl time.Duration
		var us sql.NullInt64
		if err := s.conn.QueryRowContext(sctx, b.refusedSQL, name).Scan(&us); err == nil && us.Valid {
			ttl = time.Duration(us.Int64) * time.Microsecond
		} else if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return driver.Result{}, b.fail(s, "acquire", err)
		}
		if req.Fair && req.Wait {
			if err := b.enqueueLocked(ctx, s, name, req); err != nil {
				return driver.Result{}, err
			}
		}
		return driver.Result{TTL: ttl}, nil
	}
	id, err := res.LastInsertId()
	if err != nil || id <= 0 || driver.Token(id) > driver.MaxToken {
		b.releaseName(s, name)
		return driver.Result{}, driver.Unavailable("acquire", errors.New("no fencing token from the fence table's AUTO_INCREMENT"))
	}
	token := driver.Token(id)
	if s.enqueued[name][req.Owner] {
		if _, err := s.conn.ExecContext(sctx, b.dequeueSQL, name, string(req.Owner)); err == nil {
			b.forgetQueued(s, name, req.Owner)
		}
	}
	g := &grant{key: req.Key, owner: req.Owner, token: token, expires: now.Add(req.Lease), fair: req.Fair}
	s.grants[name] = g
	b.arm(s, name, g)
	return driver.Result{Acquired: true, Token: token, TTL: req.Lease}, nil
}

// discard closes c's connection instead of returning it to the pool, so the
// server ends the session and frees its named locks.
func discard(c *sql.Conn) {
	_ = c.Raw(func(any) error { return sqldriver.ErrBadConn })
	_ = c.Close()
}

func truncKey(k string) string {
	if len(k) > 255 {
		return k[:255]
	}
	return k
}

func (b *Backend) enqueueLocked(ctx context.Context, s *slot, name string, req driver.Request) error {
	qttl := req.QueueTTL
	if qttl <= 0 {
		qttl = lockx.DefaultQueueTTL
	}
	if err := b.connect(ctx, s); err != nil {
		return err
	}
	sctx, cancel := b.stmtCtx()
	defer cancel()
	if _, err := s.conn.ExecContext(sctx, b.enqueueSQL, name, string(req.Owner), micros(qttl)); err != nil {
		return b.fail(s, "enqueue", err)
	}
	m := s.enqueued[name]
	if m == nil {
		m = map[driver.Owner]bool{}
		s.enqueued[name] = m
	}
	m[req.Owner] = true
	return nil
}

func (b *Backend) forgetQueued(s *slot, name string, owner driver.Owner) {
	if m := s.enqueued[name]; m != nil {
		delete(m, owner)
		if len(m) == 0 {
			delete(s.enqueued, name)
		}
	}
}

// releaseName frees name on s's session as often as the session holds it.
// Callers hold s.mu.
func (b *Backend) releaseName(s *slot, name string) {
	if s.conn == nil {
		return
	}
	sctx, cancel := b.stmtCtx()
	defer cancel()
	for i := 0; i < 4; i++ {
		var r sql.NullInt64
		if err := s.conn.QueryRowContext(sctx, "SELECT RELEASE_LOCK(?)", name).Scan(&r); err != nil {
			if connDead(err) {
				b.kill(s)
			}
			return
		}
		if !r.Valid || r.Int64 != 1 {
			return
		}
	}
}

// arm starts the lease timer of g. Callers hold s.mu.
func (b *Backend) arm(s *slot, name string, g *grant) {
	g.lease.Arm(time.Until(g.expires), func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.grants[name] == g && g.lease.Expired(g.expires) {
			b.expireLocked(s, name, g)
		}
	})
}

// expireLocked frees a lock whose lease passed without Extend. Callers
// hold s.mu.
func (b *Backend) expireLocked(s *slot, name string, g *grant) {
	g.lease.Stop()
	delete(s.grants, name)
	g.loss.Fire(&b.g)
	b.releaseName(s, name)
	b.hub.wake(name)
}

// Extend implements driver.Backend.
func (b *Backend) Extend(ctx context.Context, key string, owner driver.Owner, lease time.Duration) error {
	if err := b.ready(ctx); err != nil {
		return err
	}
	name := b.t.lockName(key)
	s := b.slotOf(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.grants[name]
	if g == nil || g.owner != owner || g.key != key {
		return driver.ErrNotHeld
	}
	if !time.Now().Before(g.expires) {
		b.expireLocked(s, name, g)
		return driver.ErrNotHeld
	}
	return b.extendLocked(s, name, g, lease)
}

// extendLocked renews g on its session, which doubles as the session's
// health check: a dead session, or a lock force-released by another
// process, ends in ErrNotHeld. Callers hold s.mu.
func (b *Backend) extendLocked(s *slot, name string, g *grant, lease time.Duration) error {
	if s.conn == nil {
		delete(s.grants, name)
		return driver.ErrNotHeld
	}
	now := time.Now()
	sctx, cancel := b.stmtCtx()
	defer cancel()
	res, err := s.conn.ExecContext(sctx, b.extendSQL, micros(lease), name, string(g.owner), uint64(g.token))
	if err != nil {
		if connDead(err) {
			b.kill(s) // the session and with it the lock are gone
			return driver.ErrNotHeld
		}
		return driver.Unavailable("extend", err)
	}
	s.lastOK = time.Now()
	if n, _ := res.RowsAffected(); n == 0 {
		var c int
		if err := s.conn.QueryRowContext(sctx, b.checkSQL, name, string(g.owner), uint64(g.token)).Scan(&c); err != nil {
			return b.fail(s, "extend", err)
		}
		if c == 0 { // force-released by another process: let go of it here too
			b.expireLocked(s, name, g)
			return driver.ErrNotHeld
		}
	}
	g.expires = now.Add(lease)
	b.arm(s, name, g)
	return nil
}

// Release implements driver.Backend.
func (b *Backend) Release(ctx context.Context, key string, owner driver.Owner) error {
	if err := b.ready(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	name := b.t.lockName(key)
	s := b.slotOf(name)
	s.mu.Lock()
	g := s.grants[name]
	if g != nil && g.owner == owner && g.key == key {
		expired := !time.Now().Before(g.expires)
		g.lease.Stop()
		delete(s.grants, name)
		b.releaseName(s, name)
		if g.fair {
			b.hub.wake(name)
		} else {
			b.hub.wakeOne(name)
		}
		s.mu.Unlock()
		if expired {
			return driver.ErrNotHeld
		}
		return nil
	}
	if s.enqueued[name][owner] && s.conn != nil { // a fair waiter withdrawing
		sctx, cancel := b.stmtCtx()
		_, err := s.conn.ExecContext(sctx, b.dequeueSQL, name, string(owner))
		cancel()
		if err != nil {
			err = b.fail(s, "release", err)
			s.mu.Unlock()
			return err
		}
		b.forgetQueued(s, name, owner)
		b.hub.wake(name)
	}
	s.mu.Unlock()
	// Not held here: an owner-checked force-release of a lock held by
	// another process (or Backend); its holder lets go at its next Extend.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.stmtTimeout)
	defer cancel()
	res, err := b.db.ExecContext(sctx, b.forceSQL, name, string(owner))
	if err != nil {
		return driver.Unavailable("release", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return driver.ErrNotHeld
	}
	return nil
}

// TTL implements driver.Backend.
func (b *Backend) TTL(ctx context.Context, key string, owner driver.Owner) (time.Duration, error) {
	if err := b.ready(ctx); err != nil {
		return 0, err
	}
	name := b.t.lockName(key)
	s := b.slotOf(name)
	s.mu.Lock()
	g := s.grants[name]
	if g != nil && g.owner == owner && g.key == key {
		d := time.Until(g.expires)
		s.mu.Unlock()
		if d <= 0 {
			return 0, driver.ErrNotHeld
		}
		return d, nil
	}
	s.mu.Unlock()
	return queryTTL(ctx, b.db, b.ttlSQL, name, owner)
}

// Watch implements driver.Notifier. Releases through this Backend wake at
// once; releases elsewhere (other processes, other Backends) are seen by
// polling IS_FREE_LOCK every WithPollInterval while anything waits.
func (b *Backend) Watch(ctx context.Context, key string, owner driver.Owner) (<-chan struct{}, func(), error) {
	return watch(b.hub, b.poll, b.t.lockName(key))
}

func (b *Backend) checkFree(ctx context.Context, names []string) ([]bool, error) {
	q := make([]byte, 0, 32*len(names))
	q = append(q, "SELECT "...)
	args := make([]any, len(names))
	for i, n := range names {
		if i > 0 {
			q = append(q, ',')
		}
		q = append(q, "IS_FREE_LOCK(?)"...)
		args[i] = n
	}
	return queryBools(ctx, b.db, string(q), args, len(names))
}

// healthLoop pings holder sessions that did no statement in the last
// interval, and sweeps stale bookkeeping rows now and then.
func (b *Backend) healthLoop() {
	t := time.NewTicker(b.cfg.health)
	defer t.Stop()
	for tick := 0; ; tick++ {
		select {
		case <-b.g.Done():
			return
		case <-t.C:
		}
		for _, s := range b.slots {
			s.mu.Lock()
			if s.conn != nil && time.Since(s.lastOK) >= b.cfg.health/2 {
				ctx, cancel := context.WithTimeout(context.Background(), b.cfg.stmtTimeout)
				if err := s.conn.PingContext(ctx); err != nil {
					b.kill(s)
				} else {
					s.lastOK = time.Now()
				}
				cancel()
			}
			s.mu.Unlock()
		}
		if tick%30 == 29 {
			ctx, cancel := context.WithTimeout(context.Background(), b.cfg.stmtTimeout)
			// Rows of freed locks go, but never the row of the highest
			// token, so that even a server whose AUTO_INCREMENT is not
			// persistent (MySQL 5.7, MariaDB < 10.2.4) resumes above it.
			_, _ = b.db.ExecContext(ctx, "DELETE FROM "+b.t.fence+" WHERE NOT (IS_USED_LOCK(name) <=> conn)"+
				" AND token < (SELECT m FROM (SELECT MAX(token) AS m FROM "+b.t.fence+") AS x)")
			_, _ = b.db.ExecContext(ctx, "DELETE FROM "+b.t.queue+" WHERE expires < NOW(6) - INTERVAL 1 MINUTE")
			cancel()
		}
	}
}

// Close implements driver.Backend: it closes the pinned sessions, which
// frees every lock still held through them, and stops the Backend's
// goroutines. It does not close db.
func (b *Backend) Close() error {
	if !b.g.Shut(&b.mu, b.g.Cancel) {
		return nil
	}
	b.g.Wait()
	b.poll.close()
	for _, s := range b.slots {
		s.mu.Lock()
		if s.conn != nil {
			discard(s.conn)
			s.conn = nil
		}
		for name, g := range s.grants {
			g.lease.Stop()
			delete(s.grants, name)
			b.hub.wake(name)
		}
		s.mu.Unlock()
	}
	return nil
}
