package pglock

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrateLock serialises concurrent migrations (two-int4 key space).
const migrateLockA, migrateLockB = 0x6c6f636b, 0x786d6967 // "lock", "xmig"

// Migrate creates the schema pglock needs, if it is missing: the schema, the
// fence sequence lockx_fence (a single global counter, CACHE 1 so that
// tokens increase across sessions), and UNLOGGED tables: lockx_epoch (the
// fence guard's marker), lockx_held (one
// row per held lock: key, owner, token, lease) and lockx_queue (fair
// waiters), and the read/write lock and semaphore tables lockx_pattern_held,
// lockx_pattern_queue and lockx_pattern_state. It is idempotent and safe to
// run concurrently.
//
// A role without the needed rights gets an error naming the missing
// privilege: CREATE on the database (to create the schema) or CREATE on the
// schema (to create its objects).
//
// Options other than WithSchema are ignored.
func Migrate(ctx context.Context, pool *pgxpool.Pool, opts ...Option) error {
	if pool == nil {
		return errors.New("pglock: migrate: nil pool")
	}
	cfg := newConfig(opts)
	if cfg.err != nil {
		return cfg.err
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("pglock: migrate: %w", err)
	}
	defer conn.Release()
	return migrate(ctx, conn.Conn(), cfg.schema)
}

func migrate(ctx context.Context, conn *pgx.Conn, schema string) error {
	n := newNames(schema)
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pglock: migrate: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1::int4, $2::int4)", migrateLockA, migrateLockB); err != nil {
		return fmt.Errorf("pglock: migrate: %w", err)
	}
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1)", schema).Scan(&exists); err != nil {
		return fmt.Errorf("pglock: migrate: %w", err)
	}
	if !exists {
		if _, err := tx.Exec(ctx, "CREATE SCHEMA "+n.schema); err != nil {
			return privilegeError(err, "CREATE privilege on the database (to create schema %s)", n.schema)
		}
	}
	stmts := []string{
		`CREATE SEQUENCE IF NOT EXISTS ` + n.fence + ` AS bigint MINVALUE 1 MAXVALUE 9007199254740991 CACHE 1 NO CYCLE`,
		// One marker row, present since the fence sequence was last
		// bumped past any token a crash may have un-issued (fence_guard.go):
		// UNLOGGED, so a crash or a failover empties it.
		`CREATE UNLOGGED TABLE IF NOT EXISTS ` + n.epoch + ` (id integer PRIMARY KEY)`,
		`CREATE UNLOGGED TABLE IF NOT EXISTS ` + n.held + ` (
			hash bigint PRIMARY KEY,
			key bytea NOT NULL,
			owner bytea NOT NULL,
			token bigint NOT NULL,
			expires timestamptz NOT NULL,
			pid integer NOT NULL,
			acquired timestamptz NOT NULL DEFAULT clock_timestamp())
			WITH (fillfactor = 10)`,
		`CREATE UNLOGGED TABLE IF NOT EXISTS ` + n.queue + ` (
			hash bigint NOT NULL,
			owner bytea NOT NULL,
			seq bigint NOT NULL,
			expires timestamptz NOT NULL,
			PRIMARY KEY (hash, owner))`,
		// Read/write locks and semaphores: one row per hold (kind 1 rw,
		// 2 semaphore; mode 1 read, 2 write, 3 permits), per waiter, and
		// per key in use (its read epoch).
		`CREATE UNLOGGED TABLE IF NOT EXISTS ` + n.pheld + ` (
			kind smallint NOT NULL,
			hash bigint NOT NULL,
			owner bytea NOT NULL,
			mode smallint NOT NULL,
			count bigint NOT NULL,
			token bigint NOT NULL,
			expires timestamptz NOT NULL,
			PRIMARY KEY (kind, hash, owner, mode))`,
		`CREATE UNLOGGED TABLE IF NOT EXISTS ` + n.pqueue + ` (
			kind smallint NOT NULL,
			hash bigint NOT NULL,
			owner bytea NOT NULL,
			mode smallint NOT NULL,
			count bigint NOT NULL,
			seq bigint NOT NULL,
			expires timestamptz NOT NULL,
			lim bigint NOT NULL DEFAULT 0,
			PRIMARY KEY (kind, hash, owner))`,
		`CREATE UNLOGGED TABLE IF NOT EXISTS ` + n.pstate + ` (
			kind smallint NOT NULL,
			hash bigint NOT NULL,
			token bigint NOT NULL,
			PRIMARY KEY (kind, hash))`,
	}
	// The fence guard's marker table is born with its marker: no token can
	// have been un-issued before it existed (grants commit synchronously
	// until a session has passed the guard), so the first session need not
	// move the sequence ahead. Later it is only ever emptied by a crash.
	var hadEpoch bool
	if err := tx.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", n.epoch).Scan(&hadEpoch); err != nil {
		return fmt.Errorf("pglock: migrate: %w", err)
	}
	if !hadEpoch {
		stmts = append(stmts, `INSERT INTO `+n.epoch+` (id) VALUES (1)`)
	}
	// A semaphore waiter's own limit (lim), for grants handed over
	// (sem.go), is missing from tables made by older versions; their rows
	// get 0, "unknown". Checked first: ALTER TABLE would lock the table.
	var noLim bool
	if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute
		WHERE attrelid = to_regclass($1) AND attname = 'lim' AND NOT attisdropped)`, n.pqueue).Scan(&noLim); err != nil {
		return fmt.Errorf("pglock: migrate: %w", err)
	}
	if noLim {
		stmts = append(stmts, `ALTER TABLE `+n.pqueue+` ADD COLUMN IF NOT EXISTS lim bigint NOT NULL DEFAULT 0`)
	}
	for _, s := range stmts {
		if _, err := tx.Exec(ctx, s); err != nil {
			return privilegeError(err, "CREATE privilege on schema %s", n.schema)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pglock: migrate: %w", err)
	}
	return nil
}

// privilegeError names the missing privilege when err is PostgreSQL's
// insufficient_privilege (42501), and keeps err visible to errors.As.
func privilegeError(err error, what string, args ...any) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" {
		return fmt.Errorf("pglock: migrate: the role lacks the %s; grant it or run pglock.Migrate as a role that has it: %w",
			fmt.Sprintf(what, args...), err)
	}
	return fmt.Errorf("pglock: migrate: %w", err)
}

// isMissingSchema reports errors that mean Migrate has not run: undefined
// table or sequence (42P01), schema (3F000), or column (42703: a schema
// made by an older version).
func isMissingSchema(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000" || pgErr.Code == "42703")
}

// usageError explains a permission error on the schema's objects at run
// time.
func usageError(err error, n names) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42501" {
		return fmt.Errorf("pglock: the role lacks USAGE on schema %s, USAGE and UPDATE on sequence %s, SELECT, INSERT, UPDATE and DELETE on %s and %s, or SELECT and INSERT on %s: %w",
			n.schema, n.fence, n.held, n.queue, n.epoch, err)
	}
	return err
}
