package pglock

import (
	"context"
	"encoding/hex"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/internal/backendkit"
)

// Semaphores (lockx.SemaphoreBackend) are table-based (read/write locks are
// advisory locks: rw.go): holders are rows of lockx_pattern_held with a
// lease on the server's clock, waiters rows of lockx_pattern_queue (sem.go).
// Every decision runs in one short transaction on a pool connection that
// first takes a transaction-scoped advisory lock on the key's pattern hash,
// so decisions on one key are serialised across every process, and a
// crashed holder's row simply stops counting when its lease ends.

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
	_ driver.RWBackend        = (*Backend)(nil)
	_ driver.SemaphoreBackend = (*Backend)(nil)
)

// patternLock is the advisory xact-lock key serialising decisions on a
// pattern key: distinct from the plain lock's advisory key of the same name.
func (b *Backend) patternLock(kind int, key string) int64 {
	if kind == kindRW {
		return b.cfg.id(b.cfg.namespace+"\x00rw", key)
	}
	return b.cfg.id(b.cfg.namespace+"\x00sem", key)
}

// patternTx runs fn on one pool connection, creating the schema first if
// it is missing and auto-migration is on. fn sends its statements in
// batches (one round trip each); a batch that starts with sqlBegin opens a
// transaction that a later batch commits, and its first statements take
// the key's decision lock and purge expired rows (semHead, sqlPurge). A
// connection left inside a transaction by an error is destroyed by the pool
// on release, which rolls the transaction back.
func (b *Backend) patternTx(ctx context.Context, op string, kind int, key string, fn func(c *pgx.Conn, hash, lock int64) error) error {
	if b.cfg.err != nil {
		return b.cfg.err
	}
	if err := backendkit.Ended(ctx, op); err != nil {
		return err
	}
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return backendkit.Unavailable(op, errClosed)
	}
	hash, lock := b.hash(key), b.patternLock(kind, key)
	run := func() error {
		conn, err := b.pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		return fn(conn.Conn(), hash, lock)
	}
	err := run()
	if err != nil && isMissingSchema(err) && b.cfg.autoMigrate {
		if merr := Migrate(ctx, b.pool, WithSchema(b.cfg.schema)); merr == nil {
			err = run()
		}
	}
	if err == nil || errors.Is(err, driver.ErrUpgrade) || errors.Is(err, driver.ErrNotHeld) {
		return err
	}
	if isMissingSchema(err) {
		return backendkit.Unavailable(op, errors.New("pglock: schema "+b.names.schema+" is missing: run pglock.Migrate: "+err.Error()))
	}
	if err := backendkit.Ended(ctx, op); err != nil {
		return err
	}
	return backendkit.Unavailable(op, usageError(err, b.names))
}

// sqlPurge drops a key's expired holds and queue entries, in a decision
// after the key's decision lock (semHead): a statement of its own, so that
// its snapshot is taken once the lock is held.
const (
	sqlPurge = `WITH a AS (DELETE FROM {pheld} WHERE kind = $1 AND hash = $2 AND expires <= clock_timestamp()),
		b AS (DELETE FROM {pqueue} WHERE kind = $1 AND hash = $2 AND expires <= clock_timestamp())
		SELECT 1`
)

func (b *Backend) queueTTL(d time.Duration) time.Duration {
	if d <= 0 {
		return lockx.DefaultQueueTTL
	}
	return d
}

// ownSeq is owner's place in the queue, or nil if it is not queued.
const sqlOwnSeq = `(SELECT seq FROM {pqueue} WHERE kind = $1 AND hash = $2 AND owner = $3)`

// extendPattern renews a live hold in one statement: it needs no decision
// lock, since it only moves its own row's lease.
func (b *Backend) extendPattern(ctx context.Context, op string, kind int, key string, owner driver.Owner, m int, lease time.Duration) error {
	return b.patternTx(ctx, op, kind, key, func(c *pgx.Conn, hash, _ int64) error {
		tag, err := c.Exec(ctx, b.names.expandPattern(`UPDATE {pheld} SET expires = clock_timestamp() + $5 * interval '1 millisecond'
			WHERE kind = $1 AND hash = $2 AND owner = $3 AND mode = $4 AND expires > clock_timestamp()`), kind, hash, []byte(owner), m, ms(lease))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return driver.ErrNotHeld
		}
		return nil
	})
}

// Targeted wake-ups. A NOTIFY payload "<hash>" wakes every watcher of the
// key in every process; "<hash> <owner hex> …" only the named owners'
// (dispatch). So a release wakes the waiters that can now be granted, not
// every waiter, each of which would run a decision transaction serialised on
// the key's decision lock only to be refused. The statements below compute
// the payload from the queue as it stands, with $3 (the releasing or
// granted owner) and the hold being released ($3, $4) left out; NULL means
// "notify nobody". At most maxWakeNames owners are named (a NOTIFY payload
// is limited to 8000 bytes); past that the payload wakes every watcher.
const maxWakeNames = 100

// answerLocally answers a queued fair waiter's retry with a refusal
// without a decision, if nothing can have changed for it since its last
// refused one (refusals.go).
func (b *Backend) answerLocally(req driver.Request, ask refusal) (driver.Result, bool) {
	if !req.Fair || !req.Wait {
		return driver.Result{}, false
	}
	ttl, ok := b.refs.cached(hex.EncodeToString([]byte(req.Owner)), ask)
	return driver.Result{TTL: ttl}, ok
}

// noteAnswer caches a queued fair waiter's refusal (decided after
// notification seq, while the listener was listening), or forgets the
// owner's cached refusal once it is granted.
func (b *Backend) noteAnswer(req driver.Request, ask refusal, res driver.Result, seq uint64, listening bool) {
	owner := hex.EncodeToString([]byte(req.Owner))
	switch {
	case res.Acquired:
		b.refs.forget(owner)
	case req.Fair && req.Wait && listening:
		ask.seq, ask.ttl = seq, res.TTL
		b.refs.refused(owner, ask)
	}
}
