package pglock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/pglock"
	"github.com/lockx-go/lockx/patterns/idempotency/idemtest"
)

// resultsPool returns a pool and a schema of its own, dropped at cleanup.
func resultsPool(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	dsn := testenv.PostgresURL(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	schema := "lockx_results_test_" + randHex(6)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
		if err != nil {
			t.Errorf("drop schema: %v", err)
		}
		pool.Close()
	})
	return pool, schema
}

func TestResultStore(t *testing.T) {
	pool, schema := resultsPool(t)
	s := pglock.NewResultStore(pool, pglock.WithSchema(schema)) // creates its table on first use
	idemtest.RunStore(t, func(*testing.T) driver.ResultStore { return s })
	if _, _, err := s.SaveResult(t.Context(), "short", driver.Outcome{}, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond)
	n, err := s.PurgeResults(t.Context())
	if err != nil || n == 0 {
		t.Fatalf("PurgeResults = %d, %v; want the expired outcome purged", n, err)
	}
}

func TestBackendResultStore(t *testing.T) {
	pool, schema := resultsPool(t)
	b := pglock.New(pool, pglock.WithSchema(schema))
	t.Cleanup(func() { b.Close() })
	idemtest.RunStore(t, func(*testing.T) driver.ResultStore { return b })
}

func TestResultStoreWithoutTable(t *testing.T) {
	pool, schema := resultsPool(t)
	s := pglock.NewResultStore(pool, pglock.WithSchema(schema), pglock.WithoutAutoMigrate())
	if _, err := s.LoadResult(t.Context(), "k"); !errors.Is(err, lockx.ErrUnavailable) {
		t.Fatalf("LoadResult without the table: %v, want ErrUnavailable", err)
	}
	if err := pglock.MigrateResults(t.Context(), pool, pglock.WithSchema(schema)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoadResult(t.Context(), "k"); !errors.Is(err, driver.ErrNoResult) {
		t.Fatalf("after MigrateResults: %v, want ErrNoResult", err)
	}
	if _, _, err := pglock.NewResultStore(nil).SaveResult(t.Context(), "k", driver.Outcome{}, time.Minute); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Fatalf("nil pool: %v", err)
	}
}

// TestInTx: body's writes commit with a successful outcome, are rolled back
// under a failed one (the outcome alone commits), and an error rolls back
// everything, claim included.
func TestInTx(t *testing.T) {
	pool, schema := resultsPool(t)
	ctx := t.Context()
	s := pglock.NewResultStore(pool, pglock.WithSchema(schema))
	if err := pglock.MigrateResults(ctx, pool, pglock.WithSchema(schema)); err != nil {
		t.Fatal(err)
	}
	table := pgx.Identifier{schema, "orders"}.Sanitize()
	if _, err := pool.Exec(ctx, "CREATE TABLE "+table+" (id text PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	insert := func(id string, o driver.Outcome, err error) func(context.Context, pgx.Tx) (driver.Outcome, error) {
		return func(ctx context.Context, tx pgx.Tx) (driver.Outcome, error) {
			if _, xerr := tx.Exec(ctx, "INSERT INTO "+table+" VALUES ($1)", id); xerr != nil {
				return driver.Outcome{}, xerr
			}
			return o, err
		}
	}
	count := func(id string) (n int) {
		if err := pool.QueryRow(ctx, "SELECT count(*) FROM "+table+" WHERE id = $1", id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if _, claimed, err := s.InTx(ctx, "ok", time.Minute, insert("a", driver.Outcome{Value: []byte("1")}, nil)); err != nil || !claimed || count("a") != 1 {
		t.Fatalf("success: claimed=%v err=%v rows=%d", claimed, err, count("a"))
	}
	o, claimed, err := s.InTx(ctx, "ok", time.Minute, insert("a2", driver.Outcome{}, nil))
	if err != nil || claimed || string(o.Value) != "1" || count("a2") != 0 {
		t.Fatalf("second call: %+v claimed=%v err=%v; want the stored outcome and no body", o, claimed, err)
	}
	if _, _, err := s.InTx(ctx, "failed", time.Minute, insert("b", driver.Outcome{Failed: true, Err: "declined"}, nil)); err != nil || count("b") != 0 {
		t.Fatalf("failed outcome: err=%v rows=%d; want the outcome stored and the write rolled back", err, count("b"))
	}
	if o, err := s.LoadResult(ctx, "failed"); err != nil || !o.Failed {
		t.Fatalf("failed outcome not stored: %+v %v", o, err)
	}
	boom := errors.New("boom")
	if _, _, err := s.InTx(ctx, "error", time.Minute, insert("c", driver.Outcome{}, boom)); !errors.Is(err, boom) || count("c") != 0 {
		t.Fatalf("body error: %v rows=%d", err, count("c"))
	}
	if _, err := s.LoadResult(ctx, "error"); !errors.Is(err, driver.ErrNoResult) {
		t.Fatalf("body error left a claim: %v", err)
	}
}

// TestInTxConcurrentClaims: many transactions claiming one key at once —
// no lock anywhere — run body once; the others wait for it and get its
// outcome.
func TestInTxConcurrentClaims(t *testing.T) {
	pool, schema := resultsPool(t)
	s := pglock.NewResultStore(pool, pglock.WithSchema(schema))
	if err := pglock.MigrateResults(t.Context(), pool, pglock.WithSchema(schema)); err != nil {
		t.Fatal(err)
	}
	var runs, claims atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			o, claimed, err := s.InTx(context.Background(), "k", time.Minute, func(context.Context, pgx.Tx) (driver.Outcome, error) {
				runs.Add(1)
				time.Sleep(100 * time.Millisecond)
				return driver.Outcome{Value: []byte("v")}, nil
			})
			if err != nil || string(o.Value) != "v" {
				t.Errorf("InTx = %q, %v", o.Value, err)
			}
			if claimed {
				claims.Add(1)
			}
		})
	}
	wg.Wait()
	if runs.Load() != 1 || claims.Load() != 1 {
		t.Fatalf("body ran %d times, %d claims committed; want 1 and 1", runs.Load(), claims.Load())
	}
}
