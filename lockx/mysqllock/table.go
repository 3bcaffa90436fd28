package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/internal/backendkit"
)

// TableBackend is the lease-table backend (NewTable): one InnoDB row per
// key with owner, token and expires_at, renewed by the Client's watchdog.
// It implements driver.Backend and driver.Notifier and is safe for
// concurrent use.
type TableBackend struct {
	db   *sql.DB
	cfg  config
	t    tables
	mig  migrator
	hub  *hub
	poll *poller

	acquireSQL, refusedSQL, enqueueSQL, dequeueSQL, extendSQL, checkSQL, releaseSQL, ttlSQL string

	mu       sync.Mutex
	enqueued map[string]map[driver.Owner]bool
	fairHeld map[string]driver.Owner // fair grants made here, to wake all at release
	// g marks the Backend closed (Shut under mu, g.Closed); no goroutine
	// of its own runs on it, the poller has its own.
	g backendkit.Group
}

var (
	_ driver.Backend  = (*TableBackend)(nil)
	_ driver.Notifier = (*TableBackend)(nil)
)

// NewTable returns a lease-table Backend over db. Every operation is one
// statement on any pooled connection (no session state), so it works
// behind proxies that multiplex sessions (ProxySQL, some cloud proxies) and
// needs no pinned connections. It never closes db.
func NewTable(db *sql.DB, opts ...Option) *TableBackend {
	cfg := newConfig(opts)
	t := newTables(cfg.prefix)
	b := &TableBackend{db: db, cfg: cfg, t: t, hub: &hub{}, enqueued: map[string]map[driver.Owner]bool{}, fairHeld: map[string]driver.Owner{}}
	b.poll = newPoller(b.hub, cfg.poll, b.checkFree)
	// One statement decides and records: g is computed first from the old
	// row (ON DUPLICATE KEY UPDATE assigns left to right), then the other
	// columns follow it. The token of a new grant is the row's token + 1,
	// so tokens increase per key for as long as the row lives (rows are
	// never deleted, only freed). LAST_INSERT_ID(token) reports a grant
	// of an existing row in the OK packet; a refusal leaves it 0; a new
	// row (1 affected row) is token 1.
	live := "(owner = VALUES(owner) AND expires > NOW(6))"
	b.acquireSQL = "INSERT INTO " + t.lease + " (name, k, owner, token, expires, g) VALUES (?, ?, ?, 1, NOW(6) + INTERVAL ? MICROSECOND, 0)" +
		" ON DUPLICATE KEY UPDATE" +
		" g = (" + live + " OR (expires <= NOW(6) AND " + t.queueOK() + "))," +
		" token = IF(g, LAST_INSERT_ID(IF(" + live + ", token, token + 1)), token)," +
		" k = IF(g, VALUES(k), k)," +
		" expires = IF(g, VALUES(expires), expires)," +
		" owner = IF(g, VALUES(owner), owner)," +
		" g = 0" // at rest g is 0, so a refusal changes no row and writes no redo
	b.refusedSQL = "SELECT GREATEST(TIMESTAMPDIFF(MICROSECOND, NOW(6), expires), 0) FROM " + t.lease + " WHERE name = ?"
	b.enqueueSQL = "INSERT INTO " + t.queue + " (name, owner, expires) VALUES (?, ?, NOW(6) + INTERVAL ? MICROSECOND) ON DUPLICATE KEY UPDATE expires = VALUES(expires)"
	b.dequeueSQL = "DELETE FROM " + t.queue + " WHERE name = ? AND owner = ?"
	b.extendSQL = "UPDATE " + t.lease + " SET expires = NOW(6) + INTERVAL ? MICROSECOND WHERE name = ? AND owner = ? AND expires > NOW(6)"
	b.checkSQL = "SELECT COUNT(*) FROM " + t.lease + " WHERE name = ? AND owner = ? AND expires > NOW(6)"
	b.releaseSQL = "UPDATE " + t.lease + " SET owner = '', expires = '1970-01-02 00:00:00' WHERE name = ? AND owner = ? AND expires > NOW(6)"
	b.ttlSQL = "SELECT TIMESTAMPDIFF(MICROSECOND, NOW(6), expires) FROM " + t.lease + " WHERE name = ? AND owner = ? AND expires > NOW(6)"
	return b
}

func (b *TableBackend) ready(ctx context.Context) error {
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

func (b *TableBackend) isQueued(name string, owner driver.Owner) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.enqueued[name][owner]
}

func (b *TableBackend) setQueued(name string, owner driver.Owner, on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.enqueued[name]
	if on {
		if m == nil {
			m = map[driver.Owner]bool{}
			b.enqueued[name] = m
		}
		m[owner] = true
		return
	}
	delete(m, owner)
	if len(m) == 0 {
		delete(b.enqueued, name)
	}
}

// Acquire implements driver.Backend: one statement, plus one more to read
// the holder's lease on a refusal (and queue bookkeeping in fair mode).
func (b *TableBackend) Acquire(ctx context.Context, req driver.Request) (driver.Result, error) {
	if err := b.ready(ctx); err != nil {
		return driver.Result{}, err
	}
	name := b.t.lockName(req.Key)
	o := string(req.Owner)
	res, err := b.db.ExecContext(ctx, b.acquireSQL, name, truncKey(req.Key), o, micros(req.Lease), name, o, name, o)
	if err != nil {
		return driver.Result{}, driver.Unavailable("acquire", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return driver.Result{}, driver.Unavailable("acquire", err)
	}
	if n, _ := res.RowsAffected(); n == 1 && id == 0 {
		id = 1 // a new row
	}
	if id > 0 {
		if driver.Token(id) > driver.MaxToken {
			return driver.Result{}, driver.Unavailable("acquire", errors.New("token space exhausted"))
		}
		if b.isQueued(name, req.Owner) {
			if _, err := b.db.ExecContext(context.WithoutCancel(ctx), b.dequeueSQL, name, o); err == nil {
				b.setQueued(name, req.Owner, false)
			}
		}
		if req.Fair {
			b.mu.Lock()
			b.fairHeld[name] = req.Owner
			b.mu.Unlock()
		}
		return driver.Result{Acquired: true, Token: driver.Token(id), TTL: req.Lease}, nil
	}
	var ttl time.Duration
	var us sql.NullInt64
	if err := b.db.QueryRowContext(ctx, b.refusedSQL, name).Scan(&us); err == nil && us.Valid {
		ttl = time.Duration(us.Int64) * time.Microsecond
	}
	if req.Fair && req.Wait {
		qttl := req.QueueTTL
		if qttl <= 0 {
			qttl = lockx.DefaultQueueTTL
		}
		if _, err := b.db.ExecContext(ctx, b.enqueueSQL, name, o, micros(qttl)); err != nil {
			return driver.Result{}, driver.Unavailable("enqueue", err)
		}
		b.setQueued(name, req.Owner, true)
	}
	return driver.Result{TTL: ttl}, nil
}

// Extend implements driver.Backend.
func (b *TableBackend) Extend(ctx context.Context, key string, owner driver.Owner, lease time.Duration) error {
	if err := b.ready(ctx); err != nil {
		return err
	}
	name := b.t.lockName(key)
	res, err := b.db.ExecContext(ctx, b.extendSQL, micros(lease), name, string(owner))
	if err != nil {
		return driver.Unavailable("extend", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		var c int
		if err := b.db.QueryRowContext(ctx, b.checkSQL, name, string(owner)).Scan(&c); err != nil {
			return driver.Unavailable("extend", err)
		}
		if c == 0 {
			return driver.ErrNotHeld
		}
	}
	return nil
}

// Release implements driver.Backend.
func (b *TableBackend) Release(ctx context.Context, key string, owner driver.Owner) error {
	if err := b.ready(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.cfg.stmtTimeout)
	defer cancel()
	name := b.t.lockName(key)
	res, err := b.db.ExecContext(ctx, b.releaseSQL, name, string(owner))
	if err != nil {
		return driver.Unavailable("release", err)
	}
	b.mu.Lock()
	fair := b.fairHeld[name] == owner
	if fair {
		delete(b.fairHeld, name)
	}
	b.mu.Unlock()
	if n, _ := res.RowsAffected(); n > 0 {
		if fair {
			b.hub.wake(name)
		} else {
			b.hub.wakeOne(name)
		}
		return nil
	}
	if b.isQueued(name, owner) { // a fair waiter withdrawing
		if _, err := b.db.ExecContext(ctx, b.dequeueSQL, name, string(owner)); err != nil {
			return driver.Unavailable("release", err)
		}
		b.setQueued(name, owner, false)
		b.hub.wake(name)
	}
	return driver.ErrNotHeld
}

// TTL implements driver.Backend.
func (b *TableBackend) TTL(ctx context.Context, key string, owner driver.Owner) (time.Duration, error) {
	if err := b.ready(ctx); err != nil {
		return 0, err
	}
	return queryTTL(ctx, b.db, b.ttlSQL, b.t.lockName(key), owner)
}

// Watch implements driver.Notifier: releases through Backends of this
// process wake at once; releases and expiries elsewhere are seen by
// polling every WithPollInterval while anything waits.
func (b *TableBackend) Watch(ctx context.Context, key string, owner driver.Owner) (<-chan struct{}, func(), error) {
	return watch(b.hub, b.poll, b.t.lockName(key))
}

func (b *TableBackend) checkFree(ctx context.Context, names []string) ([]bool, error) {
	args := make([]any, len(names))
	for i, n := range names {
		args[i] = n
	}
	rows, err := b.db.QueryContext(ctx, "SELECT name FROM "+b.t.lease+" WHERE expires > NOW(6) AND name IN ("+placeholders(len(names))+")", args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	held := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		held[n] = true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	free := make([]bool, len(names))
	for i, n := range names {
		free[i] = !held[n]
	}
	return free, nil
}

// Close implements driver.Backend. Locks held in the table outlive it until
// released or expired, as on any server; it does not close db.
func (b *TableBackend) Close() error {
	if b.g.Shut(&b.mu, b.g.Cancel) {
		b.poll.close()
	}
	return nil
}
