package mysqllock

import (
	"context"
	"database/sql"
	"github.com/lockx-go/lockx/lockx/driver"
	"time"
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
	table string
	queue string
	where string
}

func (in inspector) query(live string) string {
	return "SELECT f.k, f.owner, f.token, GREATEST(TIMESTAMPDIFF(MICROSECOND, NOW(6), f.expires), 0)," +
		" (SELECT COUNT(*) FROM " + in.queue + " q WHERE q.name = f.name AND q.expires > NOW(6))" +
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

func (in inspector) lock(ctx context.Context, key, name string) (driver.LockInfo, error) {
	var (
		li    driver.LockInfo
		found bool
	)
	err := in.scan(ctx, func(x driver.LockInfo) bool { li, found = x, true; return false }, in.query("f.name = ?"), name)
	switch {
	case err != nil:
		return driver.LockInfo{}, err
	case !found:
		return driver.LockInfo{}, driver.ErrNotHeld
	}
	li.Key = key // the stored key is cut to 255 bytes
	return li, nil
}

func (in inspector) locks(ctx context.Context, prefix string, fn func(driver.LockInfo) bool) error {
	return in.scan(ctx, fn, in.query("LEFT(f.k, ?) = ?")+" ORDER BY f.k", len(prefix), []byte(prefix))
}

func (b *Backend) inspector() inspector {
	return inspector{db: b.db, table: b.t.fence, queue: b.t.queue, where: "f.conn = IS_USED_LOCK(f.name)"}
}

// Lock implements driver.Inspector.
func (b *Backend) Lock(ctx context.Context, key string) (driver.LockInfo, error) {
	if err := b.ready(ctx); err != nil {
		return driver.LockInfo{}, err
	}
	return b.inspector().lock(ctx, key, b.t.lockName(key))
}

// Locks implements driver.Inspector, in key order. Keys longer than 255
// bytes are reported cut to 255 bytes.
func (b *Backend) Locks(ctx context.Context, prefix string, fn func(driver.LockInfo) bool) error {
	if err := b.ready(ctx); err != nil {
		return err
	}
	return b.inspector().locks(ctx, prefix, fn)
}

func (b *TableBackend) inspector() inspector {
	return inspector{db: b.db, table: b.t.lease, queue: b.t.queue, where: "f.owner <> '' AND f.expires > NOW(6)"}
}

// Lock implements driver.Inspector.
func (b *TableBackend) Lock(ctx context.Context, key string) (driver.LockInfo, error) {
	if err := b.ready(ctx); err != nil {
		return driver.LockInfo{}, err
	}
	return b.inspector().lock(ctx, key, b.t.lockName(key))
}

// Locks implements driver.Inspector, in key order. Keys longer than 255
// bytes are reported cut to 255 bytes.
func (b *TableBackend) Locks(ctx context.Context, prefix string, fn func(driver.LockInfo) bool) error {
	if err := b.ready(ctx); err != nil {
		return err
	}
	return b.inspector().locks(ctx, prefix, fn)
}
