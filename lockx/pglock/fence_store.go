package pglock

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/lockx-go/lockx/lockx/driver"
)

// fenceTable is the table of fences in pglock's schema: one row per
// resource with the highest token accepted for it. It is a logged table,
// unlike the lock tables: a crash must not make the database forget a
// fence and accept a stale writer again. Rows are never deleted; resources
// are bounded by the user's data.
const fenceTable = "lockx_fences"

// FenceStore is a driver.FenceStore in PostgreSQL: the table lockx_fences in
// pglock's schema. Create it with NewFenceStore; it is safe for concurrent
// use. To fence a write to a table of yours, use FencedExec inside the
// write's transaction rather than Fence followed by the write.
type FenceStore struct {
	pool        *pgxpool.Pool
	schema      string
	table       string // quoted
	upsert      string
	autoMigrate bool
	err         error
}

var (
	_ driver.FenceStore = (*FenceStore)(nil)
	_ driver.FenceStore = (*Backend)(nil)
)

// backendFences caches the fence store of each schema a Backend uses, so
// that Backend.Fence builds its statements once.
var backendFences sync.Map // schema → *FenceStore

// Fence implements driver.FenceStore on the fence table of the Backend's
// schema, so a Client's backend offers the capability:
//
//	var store driver.FenceStore
//	ok := driver.As(client.Backend(), &store)
//
// It is NewFenceStore(pool, WithSchema(schema)).Fence, with the Backend's
// auto-migration setting.
func (b *Backend) Fence(ctx context.Context, resource string, token driver.Token) error {
	if b.cfg.err != nil {
		return b.cfg.err
	}
	v, ok := backendFences.Load(b.cfg.schema)
	if !ok {
		v, _ = backendFences.LoadOrStore(b.cfg.schema, NewFenceStore(nil, WithSchema(b.cfg.schema)))
	}
	s := *v.(*FenceStore) // the cached statements, with this Backend's pool
	s.pool, s.autoMigrate, s.err = b.pool, b.cfg.autoMigrate, nil
	return s.Fence(ctx, resource, token)
}

// NewFenceStore returns a fence store on pool. WithSchema selects the
// schema (default "lockx"); the table is created on first use unless
// WithoutAutoMigrate is given, in which case run MigrateFences first. Other
// options are ignored. An invalid option or a nil pool is reported by every
// call.
func NewFenceStore(pool *pgxpool.Pool, opts ...Option) *FenceStore {
	cfg := newConfig(opts)
	if pool == nil && cfg.err == nil {
		cfg.err = fmt.Errorf("pglock: %w", &driver.ArgError{Arg: "pool", Reason: "nil"})
	}
	table := fenceTableName(cfg.schema)
	return &FenceStore{pool: pool, schema: cfg.schema, table: table, upsert: fenceUpsert(table), autoMigrate: cfg.autoMigrate, err: cfg.err}
}

func fenceTableName(schema string) string { return pgx.Identifier{schema, fenceTable}.Sanitize() }

// fenceUpsert records $2 for resource $1 if it is not below the recorded
// token, returning the token when it did and no row when it did not. On a
// conflict the row is locked whether or not it is updated, so concurrent
// fences of one resource are ordered, and in a transaction the lock is held
// until it ends.
func fenceUpsert(table string) string {
	return `INSERT INTO ` + table + ` AS f (resource, token) VALUES ($1, $2)
		ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token, updated = clock_timestamp()
		WHERE f.token <= EXCLUDED.token
		RETURNING f.token`
}

// MigrateFences creates pglock's schema (Migrate) and the fence table if
// they are missing. It is idempotent and safe to run concurrently. Only
// WithSchema is read from opts.
func MigrateFences(ctx context.Context, pool *pgxpool.Pool, opts ...Option) error {
	if err := Migrate(ctx, pool, opts...); err != nil {
		return err
	}
	cfg := newConfig(opts)
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pglock: migrate fences: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1::int4, $2::int4)", migrateLockA, migrateLockB); err != nil {
		return fmt.Errorf("pglock: migrate fences: %w", err)
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+fenceTableName(cfg.schema)+` (
			resource bytea PRIMARY KEY,
			token bigint NOT NULL CHECK (token > 0),
			updated timestamptz NOT NULL DEFAULT clock_timestamp())`); err != nil {
		return fmt.Errorf("pglock: migrate fences: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pglock: migrate fences: %w", err)
	}
	return nil
}

// Fence implements driver.FenceStore with one upsert (and, for a stale
// token, one read of the token that beat it).
func (s *FenceStore) Fence(ctx context.Context, resource string, token driver.Token) error {
	if s.err != nil {
		return s.err
	}
	if err := driver.CheckFenceArgs(resource, token); err != nil {
		return err
	}
	err := s.fence(ctx, s.pool, resource, token)
	if err != nil && s.autoMigrate && isMissingSchema(err) {
		if merr := MigrateFences(ctx, s.pool, WithSchema(s.schema)); merr != nil {
			return driver.Unavailable("fence", merr)
		}
		err = s.fence(ctx, s.pool, resource, token)
	}
	return err
}

// querier is what the fence needs of a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func (s *FenceStore) fence(ctx context.Context, q querier, resource string, token driver.Token) error {
	var got int64
	err := q.QueryRow(ctx, s.upsert, []byte(resource), int64(token)).Scan(&got)
	if err == nil {
		return nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return fenceFail(ctx, err)
	}
	var seen int64
	if err := q.QueryRow(ctx, `SELECT token FROM `+s.table+` WHERE resource = $1`, []byte(resource)).Scan(&seen); err != nil {
		return fenceFail(ctx, err)
	}
	if driver.Token(seen) <= token { // cannot happen: the row is locked
		return driver.Unavailable("fence", fmt.Errorf("fence of %q moved under a row lock: %d", resource, seen))
	}
	return &driver.StaleTokenError{Resource: resource, Token: token, Seen: driver.Token(seen)}
}

// fenceFail classifies an error of the fence statements: the context's own
// error if it ended, else an ErrUnavailable error wrapping the cause (a
// missing table included, with a hint).
func fenceFail(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
		return err
	}
	if isMissingSchema(err) {
		err = &missingFences{err}
	}
	return driver.Unavailable("fence", err)
}

type missingFences struct{ err error }

func (e *missingFences) Error() string {
	return "the fence table is missing; run pglock.MigrateFences: " + e.err.Error()
}

func (e *missingFences) Unwrap() error { return e.err }

// FencedExec runs sql in tx only if token is current for resource: it
// records the token in the fence table, in tx, and then executes the
// statement. A stale token returns a *driver.StaleTokenError and runs
// nothing; the caller should roll tx back.
//
// The fence row stays locked until tx ends, so fenced writers of one
// resource are serialized: a newer holder's FencedExec waits for an older
// one's transaction to commit or roll back, and so can never be overtaken by
// it. Keep such transactions short, and bound them
// (idle_in_transaction_session_timeout) so that a stalled holder cannot
// block the resource.
//
// The fence table must exist (MigrateFences): a failing statement would
// abort tx, so FencedExec cannot create it on the fly. Errors of sql itself
// are returned as they are.
func (s *FenceStore) FencedExec(ctx context.Context, tx pgx.Tx, resource string, token driver.Token, sql string, args ...any) (pgconn.CommandTag, error) {
	if s.err != nil {
		return pgconn.CommandTag{}, s.err
	}
	if tx == nil {
		return pgconn.CommandTag{}, &driver.ArgError{Arg: "tx", Reason: "nil"}
	}
	if err := driver.CheckFenceArgs(resource, token); err != nil {
		return pgconn.CommandTag{}, err
	}
	if err := s.fence(ctx, tx, resource, token); err != nil {
		return pgconn.CommandTag{}, err
	}
	return tx.Exec(ctx, sql, args...)
}

// FencedExec is FenceStore.FencedExec with the fence table of the default
// schema:
//
//	tx, _ := pool.Begin(ctx)
//	defer tx.Rollback(ctx)
//	if _, err := pglock.FencedExec(ctx, tx, "invoice/7", l.Token(),
//		`UPDATE invoices SET total = $1 WHERE id = $2`, total, 7); err != nil {
//		return err // errors.Is(err, driver.ErrStaleToken): a newer holder wrote
//	}
//	return tx.Commit(ctx)
func FencedExec(ctx context.Context, tx pgx.Tx, resource string, token driver.Token, sql string, args ...any) (pgconn.CommandTag, error) {
	return defaultFences.FencedExec(ctx, tx, resource, token, sql, args...)
}

var defaultFences = &FenceStore{schema: DefaultSchema, table: fenceTableName(DefaultSchema), upsert: fenceUpsert(fenceTableName(DefaultSchema))}
