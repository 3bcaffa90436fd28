package pglock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/lockx-go/lockx/lockx/driver"
)

// resultTable is the table of idempotent outcomes in pglock's schema: one
// row per key, its encoded driver.Outcome and when it expires. It is a logged
// table: an outcome is a promise to every later caller of the key, and a
// crash must not break it. Expired rows are overwritten when their key is
// used again and removed by PurgeResults.
const resultTable = "lockx_results"

// ResultStore is a driver.ResultStore in PostgreSQL, and the unique-index
// fallback of patterns/idempotency (InTx): outcomes commit in the same
// transaction as the work under the table's primary key. Create it with
// NewResultStore; it is safe for concurrent use. Expiry is decided by the
// database clock, so instances with skewed clocks agree.
type ResultStore struct {
	pool        *pgxpool.Pool
	schema      string
	table       string // quoted
	autoMigrate bool
	err         error
}

var (
	_ driver.ResultStore = (*ResultStore)(nil)
	_ driver.ResultStore = (*Backend)(nil)
)

// NewResultStore returns a result store on pool. WithSchema selects the
// schema (default "lockx"); the table is created on first use unless
// WithoutAutoMigrate is given, in which case run MigrateResults first.
// Other options are ignored. An invalid option or a nil pool is reported by
// every call.
func NewResultStore(pool *pgxpool.Pool, opts ...Option) *ResultStore {
	cfg := newConfig(opts)
	if pool == nil && cfg.err == nil {
		cfg.err = fmt.Errorf("pglock: %w", &driver.ArgError{Arg: "pool", Reason: "nil"})
	}
	return &ResultStore{pool: pool, schema: cfg.schema, table: resultTableName(cfg.schema), autoMigrate: cfg.autoMigrate, err: cfg.err}
}

func resultTableName(schema string) string { return pgx.Identifier{schema, resultTable}.Sanitize() }

// MigrateResults creates pglock's schema (Migrate) and the result table if
// they are missing. It is idempotent and safe to run concurrently. Only
// WithSchema is read from opts.
func MigrateResults(ctx context.Context, pool *pgxpool.Pool, opts ...Option) error {
	if err := Migrate(ctx, pool, opts...); err != nil {
		return err
	}
	cfg := newConfig(opts)
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pglock: migrate results: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1::int4, $2::int4)", migrateLockA, migrateLockB); err != nil {
		return fmt.Errorf("pglock: migrate results: %w", err)
	}
	table := resultTableName(cfg.schema)
	for _, stmt := range []string{
		`CREATE TABLE IF NOT EXISTS ` + table + ` (
			key bytea PRIMARY KEY,
			outcome bytea,
			created timestamptz NOT NULL DEFAULT clock_timestamp(),
			expires timestamptz NOT NULL)`,
		`CREATE INDEX IF NOT EXISTS ` + pgx.Identifier{resultTable + "_expires"}.Sanitize() + ` ON ` + table + ` (expires)`,
	} {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("pglock: migrate results: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pglock: migrate results: %w", err)
	}
	return nil
}

// claimSQL inserts key's row, or takes over an expired one, returning a row
// only if it did. On a conflict with a live row the row is locked but not
// changed, and no row is returned. A conflicting insert of another
// transaction that has not ended makes this statement wait for it.
func (s *ResultStore) claimSQL() string {
	return `INSERT INTO ` + s.table + ` AS r (key, outcome, expires)
		VALUES ($1, $2, clock_timestamp() + $3::bigint * interval '1 millisecond')
		ON CONFLICT (key) DO UPDATE SET outcome = EXCLUDED.outcome, expires = EXCLUDED.expires, created = clock_timestamp()
		WHERE r.expires <= clock_timestamp()
		RETURNING true`
}

func (s *ResultStore) loadSQL() string {
	return `SELECT outcome FROM ` + s.table + ` WHERE key = $1 AND expires > clock_timestamp() AND outcome IS NOT NULL`
}

type queryRower interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// withMigration runs op, and again after MigrateResults if the table was
// missing and auto-migration is on.
func (s *ResultStore) withMigration(ctx context.Context, op func() error) error {
	if s.err != nil {
		return s.err
	}
	err := op()
	if err != nil && s.autoMigrate && isMissingSchema(err) {
		if merr := MigrateResults(ctx, s.pool, WithSchema(s.schema)); merr != nil {
			return driver.Unavailable("results", merr)
		}
		err = op()
	}
	return err
}

func (s *ResultStore) load(ctx context.Context, q queryRower, key string) (driver.Outcome, error) {
	var raw []byte
	err := q.QueryRow(ctx, s.loadSQL(), []byte(key)).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return driver.Outcome{}, driver.ErrNoResult
	}
	if err != nil {
		return driver.Outcome{}, err
	}
	var o driver.Outcome
	if err := o.UnmarshalBinary(raw); err != nil {
		return driver.Outcome{}, driver.Unavailable("load result", err)
	}
	return o, nil
}

// LoadResult implements driver.ResultStore with one SELECT.
func (s *ResultStore) LoadResult(ctx context.Context, key string) (driver.Outcome, error) {
	if err := driver.CheckResultArgs(key, 1); err != nil {
		return driver.Outcome{}, err
	}
	var o driver.Outcome
	err := s.withMigration(ctx, func() (err error) {
		o, err = s.load(ctx, s.pool, key)
		return err
	})
	if err != nil {
		return driver.Outcome{}, resultFail(ctx, "load result", err)
	}
	return o, nil
}

// SaveResult implements driver.ResultStore with one upsert, plus one SELECT
// of the outcome that won when there was one.
func (s *ResultStore) SaveResult(ctx context.Context, key string, o driver.Outcome, retention time.Duration) (driver.Outcome, bool, error) {
	if err := driver.CheckResultArgs(key, retention); err != nil {
		return driver.Outcome{}, false, err
	}
	if o.Created.IsZero() {
		o.Created = time.Now()
	}
	raw, err := o.MarshalBinary()
	if err != nil {
		return driver.Outcome{}, false, err
	}
	var (
		won   driver.Outcome
		saved bool
	)
	// The outcome that won can expire between the upsert and the SELECT:
	// the upsert is then tried again, as it may now win itself.
	for range 3 {
		err = s.withMigration(ctx, func() error {
			err := s.pool.QueryRow(ctx, s.claimSQL(), []byte(key), raw, retentionMillis(retention)).Scan(&saved)
			if errors.Is(err, pgx.ErrNoRows) {
				won, err = s.load(ctx, s.pool, key)
			}
			return err
		})
		if !errors.Is(err, driver.ErrNoResult) {
			break
		}
	}
	switch {
	case errors.Is(err, driver.ErrNoResult): // expired between the two statements three times running
		return driver.Outcome{}, false, driver.Unavailable("save result", errors.New("the stored outcome expired during the save; retry"))
	case err != nil:
		return driver.Outcome{}, false, resultFail(ctx, "save result", err)
	case saved:
		return o, true, nil
	}
	return won, false, nil
}

// DeleteResult implements driver.ResultStore.
func (s *ResultStore) DeleteResult(ctx context.Context, key string) error {
	if err := driver.CheckResultArgs(key, 1); err != nil {
		return err
	}
	err := s.withMigration(ctx, func() error {
		_, err := s.pool.Exec(ctx, `DELETE FROM `+s.table+` WHERE key = $1`, []byte(key))
		return err
	})
	return resultFail(ctx, "delete result", err)
}

// PurgeResults deletes expired outcomes and returns how many it deleted.
// Run it now and then (Brandur's reaper); expired outcomes are never
// replayed, so this only reclaims space.
func (s *ResultStore) PurgeResults(ctx context.Context) (int64, error) {
	var n int64
	err := s.withMigration(ctx, func() error {
		tag, err := s.pool.Exec(ctx, `DELETE FROM `+s.table+` WHERE expires <= clock_timestamp()`)
		n = tag.RowsAffected()
		return err
	})
	return n, resultFail(ctx, "purge results", err)
}

// InTx implements patterns/idempotency.TxStore[pgx.Tx], the unique-index
// fallback. It opens a READ COMMITTED transaction on the pool and claims key
// with an INSERT under the table's primary key: a second transaction
// claiming key waits on that insert until the first ends, and then finds
// the committed outcome and returns it (false) without calling body. body
// runs in a savepoint (a nested pgx.Tx); its writes commit with the outcome,
// except for a Failed outcome, whose writes are rolled back to the savepoint
// so that only the outcome commits. An error from body rolls everything
// back. Inside body, take a transaction-scoped advisory lock (TxLock) as
// well if other writers of the same rows do not go through the key.
func (s *ResultStore) InTx(ctx context.Context, key string, retention time.Duration, body func(ctx context.Context, tx pgx.Tx) (driver.Outcome, error)) (driver.Outcome, bool, error) {
	if err := driver.CheckResultArgs(key, retention); err != nil {
		return driver.Outcome{}, false, err
	}
	if body == nil {
		return driver.Outcome{}, false, &driver.ArgError{Arg: "body", Reason: "nil"}
	}
	var (
		o       driver.Outcome
		claimed bool
		bodyErr error
	)
	err := s.withMigration(ctx, func() error {
		var err error
		o, claimed, bodyErr, err = s.inTx(ctx, key, retention, body)
		return err
	})
	if bodyErr != nil {
		return driver.Outcome{}, false, bodyErr
	}
	if err != nil {
		return driver.Outcome{}, false, resultFail(ctx, "result transaction", err)
	}
	return o, claimed, nil
}

// inTx runs one attempt; bodyErr is body's own error (returned unwrapped),
// err a database error.
func (s *ResultStore) inTx(ctx context.Context, key string, retention time.Duration, body func(context.Context, pgx.Tx) (driver.Outcome, error)) (o driver.Outcome, claimed bool, bodyErr, err error) {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return o, false, nil, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	err = tx.QueryRow(ctx, s.claimSQL(), []byte(key), nil, retentionMillis(retention)).Scan(&claimed)
	if errors.Is(err, pgx.ErrNoRows) {
		// A live outcome: committed before us, or by the transaction we
		// just waited for. READ COMMITTED lets this statement see it.
		o, err = s.load(ctx, tx, key)
		if errors.Is(err, driver.ErrNoResult) {
			err = errors.New("pglock: the claimed key's outcome vanished; retry")
		}
		return o, false, nil, err
	}
	if err != nil {
		return o, false, nil, err
	}

	sp, err := tx.Begin(ctx)
	if err != nil {
		return o, false, nil, err
	}
	o, bodyErr = body(ctx, sp)
	if bodyErr != nil {
		return driver.Outcome{}, false, bodyErr, nil
	}
	if o.Failed {
		err = sp.Rollback(ctx)
	} else {
		err = sp.Commit(ctx)
	}
	if err != nil {
		return o, false, nil, err
	}
	if o.Created.IsZero() {
		o.Created = time.Now()
	}
	raw, err := o.MarshalBinary()
	if err != nil {
		return o, false, nil, err
	}
	if _, err := tx.Exec(ctx, `UPDATE `+s.table+` SET outcome = $2 WHERE key = $1`, []byte(key), raw); err != nil {
		return o, false, nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return o, false, nil, err
	}
	return o, true, nil, nil
}

// resultFail classifies an error of the result statements like fenceFail:
// the context's own error if it ended, a bad argument as is, else an
// ErrUnavailable error wrapping the cause.
func resultFail(ctx context.Context, op string, err error) error {
	if err == nil || errors.Is(err, driver.ErrNoResult) || errors.Is(err, driver.ErrInvalidArgument) {
		return err
	}
	if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
		return err
	}
	if isMissingSchema(err) {
		err = fmt.Errorf("the result table is missing; run pglock.MigrateResults: %w", err)
	}
	return driver.Unavailable(op, err)
}

// results returns the backend's result store: the same pool and schema.
func (b *Backend) results() *ResultStore {
	s := NewResultStore(b.pool, WithSchema(b.cfg.schema))
	s.autoMigrate = b.cfg.autoMigrate
	if b.cfg.err != nil {
		s.err = b.cfg.err
	}
	return s
}

// LoadResult implements driver.ResultStore on the backend's pool and schema,
// so that idempotency.New(lockx.New(pglock.New(pool))) keeps outcomes in
// PostgreSQL with no further setup.
func (b *Backend) LoadResult(ctx context.Context, key string) (driver.Outcome, error) {
	return b.results().LoadResult(ctx, key)
}

// SaveResult implements driver.ResultStore; see LoadResult.
func (b *Backend) SaveResult(ctx context.Context, key string, o driver.Outcome, retention time.Duration) (driver.Outcome, bool, error) {
	return b.results().SaveResult(ctx, key, o, retention)
}

// DeleteResult implements driver.ResultStore; see LoadResult.
func (b *Backend) DeleteResult(ctx context.Context, key string) error {
	return b.results().DeleteResult(ctx, key)
}

// retentionMillis converts a retention to whole milliseconds, rounding up
// so that a positive retention never becomes zero.
func retentionMillis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
