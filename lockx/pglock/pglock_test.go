package pglock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/lockxtest"
	"github.com/lockx-go/lockx/lockx/pglock"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// env is one test's database: a pool and a schema of its own, dropped at
// cleanup.
type env struct {
	dsn    string
	pool   *pgxpool.Pool
	schema string
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func newEnv(t testing.TB, maxConns int32) *env {
	t.Helper()
	dsn := testenv.PostgresURL(t)
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = maxConns
	e0 := "lockx_test_" + randHex(6)
	cfg.ConnConfig.RuntimeParams["application_name"] = e0
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{dsn: dsn, pool: pool, schema: e0}
	t.Cleanup(func() {
		pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("cleanup connect: %v", err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{e.schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema: %v", err)
		}
	})
	return e
}

// backend returns a Backend on the env's pool and schema, closed at cleanup.
func (e *env) backend(t *testing.T, opts ...pglock.Option) *pglock.Backend {
	t.Helper()
	b := pglock.New(e.pool, append([]pglock.Option{pglock.WithSchema(e.schema)}, opts...)...)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// client returns a lockx.Client over a new Backend, closed at cleanup.
func (e *env) client(t *testing.T, opts ...pglock.Option) (*lockx.Client, *pglock.Backend) {
	t.Helper()
	b := e.backend(t, opts...)
	c := lockx.New(b)
	t.Cleanup(func() { _ = c.Close() })
	return c, b
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestConformance(t *testing.T) {
	e := newEnv(t, 60)
	lockxtest.Run(t, func(t *testing.T) driver.Backend {
		// One session per Backend: the suite makes many Backends at once.
		// Connected up front like a started process, so that the suite's
		// timing (waiters 60 ms apart) does not measure connection set-up.
		b := pglock.New(e.pool, pglock.WithSchema(e.schema), pglock.WithSessions(1))
		t.Cleanup(func() { _ = b.Close() }) // Close is idempotent; not every caller closes
		if err := b.Connect(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		return b
	})
}
