package mysqllock

import (
	"context"
	"database/sql"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
)

var (
	_ driver.Inspector = (*Backend)(nil)
	_ driver.Inspector = (*TableBackend)(nil)
)

// inspector answers driver.Inspector from one table: where is the WHERE
// clause that makes a row a live hold — in session mode the row's
// connection holds the GET_LOCK (as for a refusal's TTL), in table mode the
// row has an owner and an unexpired lease. Age is 0: no grant time is kept.
type inspector struct {
	db    *sql.DB
	t     tables
	table string
	where string
	ready func(context.Context) error // migrate first, as every call does
}

func (in inspector) query(live string) string {
	return "SELECT f.k, f.owner, f.token, GREATEST(TIMESTAMPDIFF(MICROSECOND, NOW(6), f.expires), 0)," +
		" (SELECT COUNT(*) FROM " + in.t.queue + " q WHERE q.name = f.name AND q.expires > NOW(6))" +
		" FROM " + in.table + " f WHERE " + in.where + " AND " + live
}

func (in inspector) scan(ctx context.Context, fn func(driver.LockInfo) bool, q string, args ...any) error {
	rows, err := in.db.QueryContext(ctx, q, args...)
	if err != nil {
		return driver.Unavailable("inspect", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			k, owner []byte
			token    uint64
			ttl      int64
			waiters  int
		)
		if err := rows.Scan(&k, &owner, &token, &ttl, &waiters); err != nil {
			return driver.Unavailable("inspect", err)
		}
		li := driver.LockInfo{Key: string(k), Owner: driver.Owner(owner), Token: driver.Token(token),
			TTL: time.Duration(ttl) * time.Microsecond, Waiters: waiters}
		if !fn(li) {
			return nil
		}
	}
	if err := rows.Err(); err != nil {
		return driver.Unavailable("inspect", err)
	}
	return nil
}

// Lock answers driver.Inspector.Lock.
func (in inspector) Lock(ctx context.Context, key string) (driver.LockInfo, error) {
	if err := in.ready(ctx); err != nil {
		return driver.LockInfo{}, err
	}
	var (
		li    driver.LockInfo
		found bool
	)
	err := in.scan(ctx, func(x driver.LockInfo) bool { li, found = x, true; return false }, in.query("f.name = ?"), in.t.lockName(key))
	switch {
	case err != nil:
		return driver.LockInfo{}, err
	case !found:
		return driver.LockInfo{}, driver.ErrNotHeld
	}
	li.Key = key // the stored key is cut to 255 bytes
	return li, nil
}

// Locks answers driver.Inspector.Locks.
func (in inspector) Locks(ctx context.Context, prefix string, fn func(driver.LockInfo) bool) error {
	if err := in.ready(ctx); err != nil {
		return err
	}
	return in.scan(ctx, fn, in.query("LEFT(f.k, ?) = ?")+" ORDER BY f.k", len(prefix), []byte(prefix))
}

func (b *Backend) inspector() inspector {
	return inspector{db: b.db, t: b.t, table: b.t.fence, where: "f.conn = IS_USED_LOCK(f.name)", ready: b.ready}
}

// Lock implements driver.Inspector.
func (b *Backend) Lock(ctx context.Context, key string) (driver.LockInfo, error) {
	return b.inspector().Lock(ctx, key)
}

// Locks implements driver.Inspector, in key order. Keys longer than 255
// bytes are reported cut to 255 bytes.
func (b *Backend) Locks(ctx context.Context, prefix string, fn func(driver.LockInfo) bool) error {
	return b.inspector().Locks(ctx, prefix, fn)
}

func (b *TableBackend) inspector() inspector {
	return inspector{db: b.db, t: b.t, table: b.t.lease, where: "f.owner <> '' AND f.expires > NOW(6)", ready: b.ready}
}

// Lock implements driver.Inspector.
func (b *TableBackend) Lock(ctx context.Context, key string) (driver.LockInfo, error) {
	return b.inspector().Lock(ctx, key)
}

// Locks implements driver.Inspector, in key order. Keys longer than 255
// bytes are reported cut to 255 bytes.
func (b *TableBackend) Locks(ctx context.Context, prefix string, fn func(driver.LockInfo) bool) error {
	return b.inspector().Locks(ctx, prefix, fn)
}
