package idempotency_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/lockx/pglock"
	"github.com/lockx-go/lockx/patterns/idempotency"
)

// pgEnv returns a pool and a fresh schema with the result table and an
// orders table, dropped at cleanup.
func pgEnv(t *testing.T) (*pgxpool.Pool, string, *pglock.ResultStore) {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	schema := "lockx_idem_test_" + strings.ToLower(rand.Text()[:10])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
		pool.Close()
	})
	ctx := context.Background()
	if err := pglock.MigrateResults(ctx, pool, pglock.WithSchema(schema)); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE "+pgx.Identifier{schema, "orders"}.Sanitize()+" (id bigserial PRIMARY KEY, key text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	return pool, schema, pglock.NewResultStore(pool, pglock.WithSchema(schema))
}

// TestRunTxLockGrantedTwice grants the key's lock twice on purpose — two
// guards over two independent lock backends, as after a Redis failover that
// forgot a lock — and runs the same work through both at once. The unique
// key lets exactly one transaction commit: one order row, and both callers
// get its outcome.
func TestRunTxLockGrantedTwice(t *testing.T) {
	pool, schema, store := pgEnv(t)
	orders := pgx.Identifier{schema, "orders"}.Sanitize()
	var guards []*idempotency.Guard
	for range 2 {
		locks := lockx.New(memlock.New()) // separate lock spaces: both grant "the" lock
		t.Cleanup(func() { locks.Close() })
		g, err := idempotency.New(locks, idempotency.WithStore(store))
		if err != nil {
			t.Fatal(err)
		}
		guards = append(guards, g)
	}
	var (
		runs   atomic.Int64
		values sync.Map
		wg     sync.WaitGroup
	)
	start := make(chan struct{})
	for _, g := range guards {
		wg.Go(func() {
			<-start
			id, err := idempotency.DoTx(context.Background(), g, store, "order:7", func(ctx context.Context, tx pgx.Tx) (int64, error) {
				runs.Add(1)
				var id int64
				if err := tx.QueryRow(ctx, "INSERT INTO "+orders+" (key) VALUES ('order:7') RETURNING id").Scan(&id); err != nil {
					return 0, err
				}
				time.Sleep(200 * time.Millisecond) // both holders are inside
				return id, nil
			})
			if err != nil {
				t.Error(err)
				return
			}
			values.Store(id, true)
		})
	}
	close(start)
	wg.Wait()
	var rows int
	if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+orders).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	distinct := 0
	values.Range(func(any, any) bool { distinct++; return true })
	if rows != 1 || distinct != 1 {
		t.Fatalf("%d order rows committed, %d distinct results; want exactly 1 and 1", rows, distinct)
	}
	// The second claim waited on the first's uncommitted insert, so its work
	// never ran at all.
	if runs.Load() != 1 {
		t.Fatalf("the work ran %d times, want 1", runs.Load())
	}
}

var errOutOfStock = errors.New("out of stock")

// TestRunTxOutcomes: a terminal error is stored and replayed with the
// work's writes rolled back; a retryable one stores nothing.
func TestRunTxOutcomes(t *testing.T) {
	pool, schema, store := pgEnv(t)
	orders := pgx.Identifier{schema, "orders"}.Sanitize()
	locks := lockx.New(memlock.New())
	t.Cleanup(func() { locks.Close() })
	g, _ := idempotency.New(locks, idempotency.WithStore(store), idempotency.WithErrors(errOutOfStock))
	ctx := context.Background()
	work := func(err error) func(context.Context, pgx.Tx) ([]byte, error) {
		return func(ctx context.Context, tx pgx.Tx) ([]byte, error) {
			if _, xerr := tx.Exec(ctx, "INSERT INTO "+orders+" (key) VALUES ('x')"); xerr != nil {
				return nil, xerr
			}
			return []byte("ok"), err
		}
	}
	rows := func() (n int) {
		_ = pool.QueryRow(ctx, "SELECT count(*) FROM "+orders).Scan(&n)
		return n
	}
	if _, _, err := idempotency.RunTx(ctx, g, store, "terminal", nil, work(errOutOfStock)); !errors.Is(err, errOutOfStock) {
		t.Fatal(err)
	}
	_, replayed, err := idempotency.RunTx(ctx, g, store, "terminal", nil, work(nil))
	var se *lockx.StoredError
	if !replayed || !errors.As(err, &se) || !errors.Is(err, errOutOfStock) || rows() != 0 {
		t.Fatalf("replay of a terminal error: replayed=%v err=%v rows=%d", replayed, err, rows())
	}
	if _, _, err := idempotency.RunTx(ctx, g, store, "retry", nil, work(idempotency.Retry(errors.New("timeout")))); err == nil || rows() != 0 {
		t.Fatalf("retryable: %v rows=%d", err, rows())
	}
	v, replayed, err := idempotency.RunTx(ctx, g, store, "retry", nil, work(nil))
	if err != nil || replayed || string(v) != "ok" || rows() != 1 {
		t.Fatalf("after a retryable error: %q %v %v rows=%d; want a fresh run", v, replayed, err, rows())
	}
	// The Guard's own Run replays what RunTx stored.
	if v, replayed, err := g.Run(ctx, "retry", nil, func(context.Context) ([]byte, error) { return nil, nil }); !replayed || string(v) != "ok" || err != nil {
		t.Fatalf("Run after RunTx: %q %v %v", v, replayed, err)
	}
}

// pgGuards returns n guards over n pglock backends, each on its own pool
// (its own process), sharing one database and schema: n service instances
// sharing PostgreSQL for locks and outcomes.
func pgGuards(t *testing.T, n int, opts ...idempotency.Option) []*idempotency.Guard {
	_, schema, _ := pgEnv(t)
	gs := make([]*idempotency.Guard, n)
	for i := range gs {
		cfg, err := pgxpool.ParseConfig(testenv.PostgresURL(t))
		if err != nil {
			t.Fatal(err)
		}
		cfg.MaxConns = 6 // 3 holder sessions, the listener, the results
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		locks := lockx.New(pglock.New(pool, pglock.WithSchema(schema)))
		t.Cleanup(func() { locks.Close() }) // before the pool: cleanups run last first
		g, err := idempotency.New(locks, opts...)
		if err != nil {
			t.Fatal(err)
		}
		gs[i] = g
	}
	return gs
}

func TestConcurrentOncePostgres(t *testing.T) { testConcurrentOnce(t, pgGuards) }
