package pglock

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/internal/backendkit"
)

var _ driver.Inspector = (*Backend)(nil)

// sqlInspect lists the held locks of the schema: rows of the lock table
// whose session still holds the advisory lock (pg_locks), with the lease
// left and the age by the server's clock, and the live fair waiters. $1 is
// the key prefix (bytea); keys of other namespaces sharing the schema are
// filtered out by the caller, which recomputes the hash.
const sqlInspect = `SELECT h.hash, h.key, h.owner, h.token,
	greatest(extract(epoch FROM h.expires - clock_timestamp()), 0)::float8,
	greatest(extract(epoch FROM clock_timestamp() - h.acquired), 0)::float8,
	(SELECT count(*) FROM {queue} q WHERE q.hash = h.hash AND q.expires > clock_timestamp())::int8
FROM {held} h
WHERE h.expires > clock_timestamp() AND substring(h.key FROM 1 FOR length($1::bytea)) = $1::bytea AND {live}
ORDER BY h.key`

// Locks implements lockx.Inspector: one query joining the lock table with
// pg_locks, so a row left behind by a dead session is never reported. Age
// is measured from the grant by the server's clock.
//
// A hold younger than the publish delay has no row yet (WithPublishDelay):
// when some advisory lock of the database is held without a live row, Locks
// waits until such a hold would have written its row and reads again.
func (b *Backend) Locks(ctx context.Context, prefix string, fn func(driver.LockInfo) bool) error {
	infos, err := b.inspect(ctx, "locks", prefix)
	if err != nil {
		return err
	}
	if b.cfg.publishDelay > 0 {
		var young bool
		sent := time.Now()
		if err := b.pool.QueryRow(ctx, b.names.expand(sqlUnpublished)).Scan(&young); err != nil && !isMissingSchema(err) {
			return backendkit.Unavailable("locks", err)
		}
		if young {
			t := time.NewTimer(b.lookWindow(time.Since(sent)))
			select {
			case <-ctx.Done():
				t.Stop()
				return backendkit.Ended(ctx, "locks")
			case <-t.C:
			}
			if infos, err = b.inspect(ctx, "locks", prefix); err != nil {
				return err
			}
		}
	}
	for _, li := range infos {
		if !fn(li) {
			break
		}
	}
	return nil
}

// Lock implements lockx.Inspector. A key held by a hold too young to have
// written its row (WithPublishDelay) is read again until it has.
func (b *Backend) Lock(ctx context.Context, key string) (driver.LockInfo, error) {
	var li driver.LockInfo
	try := func() (bool, error) {
		infos, err := b.inspect(ctx, "lock", key)
		if err != nil {
			return false, err
		}
		for _, x := range infos {
			if x.Key == key {
				li = x
				return true, nil
			}
		}
		return false, nil
	}
	found, err := b.checkRemote(ctx, "lock", key, try)
	if err != nil {
		return driver.LockInfo{}, err
	}
	if !found {
		return driver.LockInfo{}, driver.ErrNotHeld
	}
	return li, nil
}

// sqlUnpublished is true when some session holds an exclusive advisory lock
// of this database that no live row of the lock table names: a hold too
// young to have written its row, or a lock taken outside pglock.
const sqlUnpublished = `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_locks l
	WHERE ` + sqlExclusiveAdvisory + `
	AND NOT EXISTS (SELECT 1 FROM {held} h WHERE h.hash = ((l.classid::int8 << 32) | l.objid::int8) AND h.pid = l.pid
		AND h.expires > clock_timestamp()))`

func (b *Backend) inspect(ctx context.Context, op, prefix string) ([]driver.LockInfo, error) {
	q := strings.NewReplacer("{live}", sqlLive, "{held}", b.names.held, "{queue}", b.names.queue).Replace(sqlInspect)
	rows, err := b.pool.Query(ctx, q, []byte(prefix))
	if err != nil {
		return nil, inspectError(op, err)
	}
	var out []driver.LockInfo
	for rows.Next() {
		var (
			hash       int64
			key, owner []byte
			token      int64
			ttl, age   float64
			waiters    int64
		)
		if err := rows.Scan(&hash, &key, &owner, &token, &ttl, &age, &waiters); err != nil {
			rows.Close()
			return nil, backendkit.Unavailable(op, err)
		}
		if b.cfg.id(b.cfg.namespace, string(key)) != hash {
			continue // another namespace's lock in the same schema
		}
		out = append(out, driver.LockInfo{
			Key: string(key), Owner: driver.Owner(owner), Token: driver.Token(token),
			TTL: secs(ttl), Age: secs(age), Waiters: int(waiters),
		})
	}
	if err := rows.Err(); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, nil
		}
		return nil, inspectError(op, err)
	}
	return out, nil
}

// inspectError maps a failed inspection to its verdict. A schema not made
// yet (the first lock makes it, unless WithoutAutoMigrate) holds no lock:
// an operator or leader.Election.Leader asking before any lock was taken
// gets an empty answer, not an outage.
func inspectError(op string, err error) error {
	if isMissingSchema(err) {
		return nil
	}
	return backendkit.Unavailable(op, err)
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
