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
func (b *Backend) Locks(ctx context.Context, prefix string, fn func(driver.LockInfo) bool) error {
	infos, err := b.inspect(ctx, "locks", prefix)
	if err != nil {
		return err
	}
	for _, li := range infos {
		if !fn(li) {
			break
		}
	}
	return nil
}

// Lock implements lockx.Inspector.
func (b *Backend) Lock(ctx context.Context, key string) (driver.LockInfo, error) {
	infos, err := b.inspect(ctx, "lock", key)
	if err != nil {
		return driver.LockInfo{}, err
	}
	for _, li := range infos {
		if li.Key == key {
			return li, nil
		}
	}
	return driver.LockInfo{}, driver.ErrNotHeld
}

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
