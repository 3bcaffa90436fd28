package pglock

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/internal/backendkit"
)

// TxLock takes key's lock for the rest of transaction tx and returns a
// fencing token drawn in the same statement. The lock is
// pg_advisory_xact_lock: PostgreSQL frees it at commit or rollback, so the
// lock and the business write it protects commit together — the strongest
// pattern this package offers. TxLock waits in PostgreSQL's own lock queue
// (fair, no polling) until granted or ctx ends; bound the wait with ctx or
// with SET LOCAL lock_timeout. pgx's default reaction to a cancelled ctx is
// to close the connection, which ends the transaction.
//
// It excludes, and is excluded by, session locks of Backends with the same
// namespace (WithNamespace) on the same database; tokens come from the same
// fence sequence (WithSchema), which must exist (Migrate, or any Backend's
// first use). Fair queues of Backends are not consulted.
func TxLock(ctx context.Context, tx pgx.Tx, key string, opts ...Option) (driver.Token, error) {
	return txLock(ctx, tx, key, newConfig(opts), true)
}

// TryTxLock is TxLock without waiting: it returns an error matching
// lockx.ErrNotAcquired if another session holds the key.
func TryTxLock(ctx context.Context, tx pgx.Tx, key string, opts ...Option) (driver.Token, error) {
	return txLock(ctx, tx, key, newConfig(opts), false)
}

// TxLock is the package-level TxLock with the Backend's schema and
// namespace.
func (b *Backend) TxLock(ctx context.Context, tx pgx.Tx, key string) (driver.Token, error) {
	return txLock(ctx, tx, key, b.cfg, true)
}

// TryTxLock is the package-level TryTxLock with the Backend's schema and
// namespace.
func (b *Backend) TryTxLock(ctx context.Context, tx pgx.Tx, key string) (driver.Token, error) {
	return txLock(ctx, tx, key, b.cfg, false)
}

// The fence sequence is looked up at run time (to_regclass), so a missing
// schema is reported without aborting the caller's transaction: the token
// is then NULL (wait) or 0 (try).
const (
	sqlTxLock    = `WITH l AS MATERIALIZED (SELECT pg_advisory_xact_lock($1::int8)) SELECT nextval(to_regclass($2::text)) FROM l`
	sqlTryTxLock = `SELECT CASE WHEN pg_try_advisory_xact_lock($1::int8) THEN coalesce(nextval(to_regclass($2::text)), 0) END`
)

func txLock(ctx context.Context, tx pgx.Tx, key string, cfg config, wait bool) (driver.Token, error) {
	switch {
	case cfg.err != nil:
		return 0, cfg.err
	case tx == nil:
		return 0, fmt.Errorf("pglock: %w", &driver.ArgError{Arg: "tx", Reason: "nil"})
	case key == "":
		return 0, fmt.Errorf("pglock: %w", &driver.ArgError{Arg: "key", Reason: "empty"})
	}
	n := newNames(cfg.schema)
	q := sqlTryTxLock
	if wait {
		q = sqlTxLock
	}
	var tok *int64
	err := tx.QueryRow(ctx, q, cfg.id(cfg.namespace, key), n.fence).Scan(&tok)
	switch {
	case err != nil:
		if ctx.Err() != nil {
			err = errors.Join(err, context.Cause(ctx))
		}
		return 0, fmt.Errorf("pglock: tx lock %q: %w", key, backendkit.Unavailable("tx lock", usageError(err, n)))
	case tok == nil && !wait:
		return 0, fmt.Errorf("pglock: tx lock %q: %w", key, driver.ErrNotAcquired)
	case tok == nil || *tok == 0:
		return 0, fmt.Errorf("pglock: tx lock %q: fence sequence %s is missing: run pglock.Migrate", key, n.fence)
	}
	return driver.Token(*tok), nil
}
