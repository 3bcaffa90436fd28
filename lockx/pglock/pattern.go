package pglock

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockx-go/lockx/lockx"
)

// Read/write locks and semaphores (lockx.RWBackend, lockx.SemaphoreBackend)
// are table-based: each hold — each reader, the writer, each permit holder —
// is one row of lockx_pattern_held with a lease on the server's clock, and
// waiters are rows of lockx_pattern_queue. Every decision runs in one short
// transaction on a pool connection that first takes a transaction-scoped
// advisory lock on the key's pattern hash, so decisions on one key are
// serialised across every process, and a crashed holder's row simply stops
// counting when its lease ends. Releases send a NOTIFY with the key's hash,
// which Watch on the same key string receives.

// Pattern kinds: a read/write key and a semaphore key of the same name are
// distinct.
const (
	kindRW  = 1
	kindSem = 2
)

// Modes of a held row: read, write, permit.
const (
	rowRead   = 1
	rowWrite  = 2
	rowPermit = 3
)

var (
	_ lockx.RWBackend        = (*Backend)(nil)
	_ lockx.SemaphoreBackend = (*Backend)(nil)
)

// patternLock is the advisory xact-lock key serialising decisions on a
// pattern key: distinct from the plain lock's advisory key of the same name.
func (b *Backend) patternLock(kind int, key string) int64 {
	if kind == kindRW {
		return keyHash(b.cfg.namespace+"\x00rw", key)
	}
	return keyHash(b.cfg.namespace+"\x00sem", key)
}

// patternTx runs fn in one transaction holding the key's decision lock,
// creating the schema first if it is missing and auto-migration is on.
func (b *Backend) patternTx(ctx context.Context, op string, kind int, key string, fn func(tx pgx.Tx, hash int64) error) error {
	if b.cfg.err != nil {
		return b.cfg.err
	}
	if err := ctx.Err(); err != nil {
		return unavailable(op, context.Cause(ctx))
	}
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return unavailable(op, errClosed)
	}
	hash := b.hash(key)
	run := func() error {
		return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", b.patternLock(kind, key)); err != nil {
				return err
			}
			return fn(tx, hash)
		})
	}
	err := run()
	if err != nil && isMissingSchema(err) && b.cfg.autoMigrate {
		if merr := Migrate(ctx, b.pool, WithSchema(b.cfg.schema)); merr == nil {
			err = run()
		}
	}
	if err == nil || errors.Is(err, lockx.ErrUpgrade) || errors.Is(err, lockx.ErrNotHeld) {
		return err
	}
	if isMissingSchema(err) {
		return unavailable(op, errors.New("pglock: schema "+b.names.schema+" is missing: run pglock.Migrate: "+err.Error()))
	}
	if ctx.Err() != nil {
		return unavailable(op, context.Cause(ctx))
	}
	return unavailable(op, usageError(err, b.names))
}

// purge deletes the key's expired holds and queue entries.
func (b *Backend) purge(ctx context.Context, tx pgx.Tx, kind int, hash int64) error {
	_, err := tx.Exec(ctx, b.names.expandPattern(`WITH a AS (DELETE FROM {pheld} WHERE kind = $1 AND hash = $2 AND expires <= clock_timestamp()),
		b AS (DELETE FROM {pqueue} WHERE kind = $1 AND hash = $2 AND expires <= clock_timestamp())
		SELECT 1`), kind, hash)
	return err
}

// notify wakes the key's watchers in every process.
func (b *Backend) notify(ctx context.Context, tx pgx.Tx, hash int64) error {
	_, err := tx.Exec(ctx, "SELECT pg_notify($1, $2)", b.names.channel, string(b.payload(hash)))
	return err
}

// idle forgets the key's read epoch once nobody holds or awaits it.
func (b *Backend) idle(ctx context.Context, tx pgx.Tx, kind int, hash int64) error {
	_, err := tx.Exec(ctx, b.names.expandPattern(`DELETE FROM {pstate} s WHERE s.kind = $1 AND s.hash = $2
		AND NOT EXISTS (SELECT 1 FROM {pheld} h WHERE h.kind = $1 AND h.hash = $2)
		AND NOT EXISTS (SELECT 1 FROM {pqueue} q WHERE q.kind = $1 AND q.hash = $2)`), kind, hash)
	return err
}

// enqueue adds owner to the key's queue or refreshes its entry (keeping its
// place).
func (b *Backend) enqueuePattern(ctx context.Context, tx pgx.Tx, kind int, hash int64, owner lockx.Owner, mode int, count int64, qttl time.Duration) error {
	_, err := tx.Exec(ctx, b.names.expandPattern(`INSERT INTO {pqueue} (kind, hash, owner, mode, count, seq, expires)
		VALUES ($1, $2, $3, $4, $5, {fence}, clock_timestamp() + $6 * interval '1 millisecond')
		ON CONFLICT (kind, hash, owner) DO UPDATE SET mode = EXCLUDED.mode, count = EXCLUDED.count, expires = EXCLUDED.expires`),
		kind, hash, []byte(owner), mode, count, ms(qttl))
	return err
}

func (b *Backend) queueTTL(d time.Duration) time.Duration {
	if d <= 0 {
		return lockx.DefaultQueueTTL
	}
	return d
}

// ownSeq is owner's place in the queue, or nil if it is not queued.
const sqlOwnSeq = `(SELECT seq FROM {pqueue} WHERE kind = $1 AND hash = $2 AND owner = $3)`

// AcquireRW implements lockx.RWBackend in one transaction.
func (b *Backend) AcquireRW(ctx context.Context, mode lockx.RWMode, req lockx.Request) (lockx.Result, error) {
	if mode != lockx.ModeRead && mode != lockx.ModeWrite {
		return lockx.Result{}, &lockx.ArgError{Arg: "mode", Reason: "neither read nor write"}
	}
	var res lockx.Result
	owner := []byte(req.Owner)
	err := b.patternTx(ctx, "acquire "+mode.String(), kindRW, req.Key, func(tx pgx.Tx, hash int64) error {
		if err := b.purge(ctx, tx, kindRW, hash); err != nil {
			return err
		}
		// Who holds the key: this owner's modes, another writer, other
		// readers, and the blocker's remaining lease.
		var mine, otherW, otherR int64
		var wttl, rttl *int64
		if err := tx.QueryRow(ctx, b.names.expandPattern(`SELECT
			coalesce(bit_or(CASE WHEN owner = $3 THEN mode END), 0)::int8,
			count(*) FILTER (WHERE owner <> $3 AND mode = 2),
			count(*) FILTER (WHERE owner <> $3 AND mode = 1),
			(extract(epoch FROM max(expires) FILTER (WHERE owner <> $3 AND mode = 2) - clock_timestamp()) * 1000)::int8,
			(extract(epoch FROM min(expires) FILTER (WHERE owner <> $3 AND mode = 1) - clock_timestamp()) * 1000)::int8
			FROM {pheld} WHERE kind = $1 AND hash = $2`), kindRW, hash, owner).Scan(&mine, &otherW, &otherR, &wttl, &rttl); err != nil {
			return err
		}
		refuse := func(queue bool) error {
			switch {
			case wttl != nil:
				res = lockx.Result{TTL: time.Duration(max(*wttl, 0)) * time.Millisecond}
			case rttl != nil:
				res = lockx.Result{TTL: time.Duration(max(*rttl, 0)) * time.Millisecond}
			default:
				res = lockx.Result{}
			}
			if req.Wait && queue {
				m := rowRead
				if mode == lockx.ModeWrite {
					m = rowWrite
				}
				return b.enqueuePattern(ctx, tx, kindRW, hash, req.Owner, m, 1, b.queueTTL(req.QueueTTL))
			}
			return nil
		}
		grant := func(tok int64) error {
			res = lockx.Result{Acquired: true, Token: lockx.Token(tok), TTL: req.Lease}
			_, err := tx.Exec(ctx, b.names.expandPattern(`DELETE FROM {pqueue} WHERE kind = $1 AND hash = $2 AND owner = $3`), kindRW, hash, owner)
			return err
		}
		hold := func(m int, tok int64) error {
			_, err := tx.Exec(ctx, b.names.expandPattern(`INSERT INTO {pheld} (kind, hash, owner, mode, count, token, expires)
				VALUES ($1, $2, $3, $4, 1, $5, clock_timestamp() + $6 * interval '1 millisecond')
				ON CONFLICT (kind, hash, owner, mode) DO UPDATE SET expires = EXCLUDED.expires, token = EXCLUDED.token`),
				kindRW, hash, owner, m, tok, ms(req.Lease))
			return err
		}
		if mode == lockx.ModeWrite {
			if mine&rowWrite != 0 { // idempotent per owner
				var tok int64
				if err := tx.QueryRow(ctx, b.names.expandPattern(`UPDATE {pheld} SET expires = clock_timestamp() + $4 * interval '1 millisecond'
					WHERE kind = $1 AND hash = $2 AND owner = $3 AND mode = 2 RETURNING token`), kindRW, hash, owner, ms(req.Lease)).Scan(&tok); err != nil {
					return err
				}
				return grant(tok)
			}
			if mine&rowRead != 0 {
				return lockx.ErrUpgrade
			}
			if otherW > 0 || otherR > 0 {
				return refuse(true)
			}
			var head []byte
			err := tx.QueryRow(ctx, b.names.expandPattern(`SELECT owner FROM {pqueue} WHERE kind = $1 AND hash = $2 ORDER BY seq LIMIT 1`), kindRW, hash).Scan(&head)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			if head != nil && string(head) != string(owner) {
				return refuse(true)
			}
			var tok int64
			if err := tx.QueryRow(ctx, b.names.expandPattern(`INSERT INTO {pstate} (kind, hash, token) VALUES ($1, $2, {fence})
				ON CONFLICT (kind, hash) DO UPDATE SET token = EXCLUDED.token RETURNING token`), kindRW, hash).Scan(&tok); err != nil {
				return err
			}
			if err := hold(rowWrite, tok); err != nil {
				return err
			}
			return grant(tok)
		}
		// Read side.
		epoch := func() (int64, error) {
			var tok int64
			err := tx.QueryRow(ctx, b.names.expandPattern(`INSERT INTO {pstate} (kind, hash, token) VALUES ($1, $2, {fence})
				ON CONFLICT (kind, hash) DO UPDATE SET token = {pstate}.token RETURNING token`), kindRW, hash).Scan(&tok)
			return tok, err
		}
		if mine&rowRead != 0 { // idempotent per owner
			tok, err := epoch()
			if err != nil {
				return err
			}
			if err := hold(rowRead, tok); err != nil {
				return err
			}
			return grant(tok)
		}
		if otherW > 0 {
			return refuse(req.Fair)
		}
		if req.Fair && mine&rowWrite == 0 {
			// Writer preference: a writer queued ahead of us goes first.
			var blocked bool
			if err := tx.QueryRow(ctx, b.names.expandPattern(`SELECT EXISTS (SELECT 1 FROM {pqueue}
				WHERE kind = $1 AND hash = $2 AND mode = 2 AND owner <> $3
				AND seq < coalesce(`+sqlOwnSeq+`, 9223372036854775807))`), kindRW, hash, owner).Scan(&blocked); err != nil {
				return err
			}
			if blocked {
				return refuse(true)
			}
		}
		tok, err := epoch()
		if err != nil {
			return err
		}
		if err := hold(rowRead, tok); err != nil {
			return err
		}
		return grant(tok)
	})
	if err != nil {
		return lockx.Result{}, err
	}
	return res, nil
}

// ExtendRW implements lockx.RWBackend.
func (b *Backend) ExtendRW(ctx context.Context, mode lockx.RWMode, key string, owner lockx.Owner, lease time.Duration) error {
	if mode != lockx.ModeRead && mode != lockx.ModeWrite {
		return &lockx.ArgError{Arg: "mode", Reason: "neither read nor write"}
	}
	m := rowRead
	if mode == lockx.ModeWrite {
		m = rowWrite
	}
	return b.extendPattern(ctx, "extend "+mode.String(), kindRW, key, owner, m, lease)
}

func (b *Backend) extendPattern(ctx context.Context, op string, kind int, key string, owner lockx.Owner, m int, lease time.Duration) error {
	return b.patternTx(ctx, op, kind, key, func(tx pgx.Tx, hash int64) error {
		tag, err := tx.Exec(ctx, b.names.expandPattern(`UPDATE {pheld} SET expires = clock_timestamp() + $5 * interval '1 millisecond'
			WHERE kind = $1 AND hash = $2 AND owner = $3 AND mode = $4 AND expires > clock_timestamp()`), kind, hash, []byte(owner), m, ms(lease))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return lockx.ErrNotHeld
		}
		return nil
	})
}

// ReleaseRW implements lockx.RWBackend. It notifies the key's watchers.
func (b *Backend) ReleaseRW(ctx context.Context, mode lockx.RWMode, key string, owner lockx.Owner) error {
	if mode != lockx.ModeRead && mode != lockx.ModeWrite {
		return &lockx.ArgError{Arg: "mode", Reason: "neither read nor write"}
	}
	m := rowRead
	if mode == lockx.ModeWrite {
		m = rowWrite
	}
	return b.releasePattern(ctx, "release "+mode.String(), kindRW, key, owner, m)
}

func (b *Backend) releasePattern(ctx context.Context, op string, kind int, key string, owner lockx.Owner, m int) error {
	var held bool
	err := b.patternTx(ctx, op, kind, key, func(tx pgx.Tx, hash int64) error {
		if err := b.purge(ctx, tx, kind, hash); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, b.names.expandPattern(`DELETE FROM {pheld} WHERE kind = $1 AND hash = $2 AND owner = $3 AND mode = $4`), kind, hash, []byte(owner), m)
		if err != nil {
			return err
		}
		held = tag.RowsAffected() > 0
		q, err := tx.Exec(ctx, b.names.expandPattern(`DELETE FROM {pqueue} WHERE kind = $1 AND hash = $2 AND owner = $3`), kind, hash, []byte(owner))
		if err != nil {
			return err
		}
		if held || q.RowsAffected() > 0 {
			if err := b.notify(ctx, tx, hash); err != nil {
				return err
			}
		}
		return b.idle(ctx, tx, kind, hash)
	})
	if err != nil {
		return err
	}
	if !held {
		return lockx.ErrNotHeld
	}
	return nil
}

// AcquirePermits implements lockx.SemaphoreBackend in one transaction.
func (b *Backend) AcquirePermits(ctx context.Context, req lockx.PermitRequest) (lockx.Result, error) {
	switch {
	case req.Limit <= 0:
		return lockx.Result{}, &lockx.ArgError{Arg: "limit", Reason: "must be positive"}
	case req.Count <= 0:
		return lockx.Result{}, &lockx.ArgError{Arg: "permits", Reason: "must be positive"}
	case req.Count > req.Limit:
		return lockx.Result{}, &lockx.ArgError{Arg: "permits", Reason: "more than the limit"}
	}
	var res lockx.Result
	owner := []byte(req.Owner)
	err := b.patternTx(ctx, "acquire permits", kindSem, req.Key, func(tx pgx.Tx, hash int64) error {
		if err := b.purge(ctx, tx, kindSem, hash); err != nil {
			return err
		}
		var tok *int64
		err := tx.QueryRow(ctx, b.names.expandPattern(`UPDATE {pheld} SET expires = clock_timestamp() + $4 * interval '1 millisecond'
			WHERE kind = $1 AND hash = $2 AND owner = $3 AND mode = 3 RETURNING token`), kindSem, hash, owner, ms(req.Lease)).Scan(&tok)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if tok != nil { // idempotent per owner
			res = lockx.Result{Acquired: true, Token: lockx.Token(*tok), TTL: req.Lease}
			return nil
		}
		var inUse, ahead int64
		var ttl *int64
		if err := tx.QueryRow(ctx, b.names.expandPattern(`SELECT
			(SELECT coalesce(sum(count), 0)::int8 FROM {pheld} WHERE kind = $1 AND hash = $2),
			CASE WHEN $4 THEN (SELECT coalesce(sum(count), 0)::int8 FROM {pqueue}
				WHERE kind = $1 AND hash = $2 AND owner <> $3 AND seq < coalesce(`+sqlOwnSeq+`, 9223372036854775807)) ELSE 0 END,
			(SELECT (extract(epoch FROM min(expires) - clock_timestamp()) * 1000)::int8 FROM {pheld} WHERE kind = $1 AND hash = $2)`),
			kindSem, hash, owner, req.Fair).Scan(&inUse, &ahead, &ttl); err != nil {
			return err
		}
		if inUse+ahead+req.Count > req.Limit {
			res = lockx.Result{}
			if ttl != nil {
				res.TTL = time.Duration(max(*ttl, 0)) * time.Millisecond
			}
			if req.Wait {
				return b.enqueuePattern(ctx, tx, kindSem, hash, req.Owner, rowPermit, req.Count, b.queueTTL(req.QueueTTL))
			}
			return nil
		}
		var t int64
		if err := tx.QueryRow(ctx, b.names.expandPattern(`INSERT INTO {pheld} (kind, hash, owner, mode, count, token, expires)
			VALUES ($1, $2, $3, 3, $4, {fence}, clock_timestamp() + $5 * interval '1 millisecond') RETURNING token`),
			kindSem, hash, owner, req.Count, ms(req.Lease)).Scan(&t); err != nil {
			return err
		}
		q, err := tx.Exec(ctx, b.names.expandPattern(`DELETE FROM {pqueue} WHERE kind = $1 AND hash = $2 AND owner = $3`), kindSem, hash, owner)
		if err != nil {
			return err
		}
		if q.RowsAffected() > 0 && inUse+req.Count < req.Limit {
			// The head left the queue with capacity to spare: the next
			// queued requests may fit now.
			if err := b.notify(ctx, tx, hash); err != nil {
				return err
			}
		}
		res = lockx.Result{Acquired: true, Token: lockx.Token(t), TTL: req.Lease}
		return nil
	})
	if err != nil {
		return lockx.Result{}, err
	}
	return res, nil
}

// ExtendPermits implements lockx.SemaphoreBackend.
func (b *Backend) ExtendPermits(ctx context.Context, key string, owner lockx.Owner, lease time.Duration) error {
	return b.extendPattern(ctx, "extend permits", kindSem, key, owner, rowPermit, lease)
}

// ReleasePermits implements lockx.SemaphoreBackend. It notifies the key's
// watchers.
func (b *Backend) ReleasePermits(ctx context.Context, key string, owner lockx.Owner) error {
	return b.releasePattern(ctx, "release permits", kindSem, key, owner, rowPermit)
}

// Permits implements lockx.SemaphoreBackend.
func (b *Backend) Permits(ctx context.Context, key string) (lockx.PermitUsage, error) {
	var u lockx.PermitUsage
	err := b.patternTx(ctx, "permits", kindSem, key, func(tx pgx.Tx, hash int64) error {
		if err := b.purge(ctx, tx, kindSem, hash); err != nil {
			return err
		}
		return tx.QueryRow(ctx, b.names.expandPattern(`SELECT
			(SELECT coalesce(sum(count), 0)::int8 FROM {pheld} WHERE kind = $1 AND hash = $2),
			(SELECT count(*) FROM {pheld} WHERE kind = $1 AND hash = $2),
			(SELECT count(*) FROM {pqueue} WHERE kind = $1 AND hash = $2)`), kindSem, hash).Scan(&u.InUse, &u.Holders, &u.Waiting)
	})
	return u, err
}
