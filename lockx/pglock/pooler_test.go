package pglock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/pglock"
)

// bouncedClient returns a client of a Backend that reaches PostgreSQL
// through a PgBouncer in poolMode, on the schema of a fresh env.
func bouncedClient(t *testing.T, poolMode string) *lockx.Client {
	t.Helper()
	e := newEnv(t, 4)
	bouncer := testenv.StartPgBouncer(t, poolMode)
	cfg, err := pgxpool.ParseConfig(bouncer.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	b := pglock.New(pool, pglock.WithSchema(e.schema))
	c := lockx.New(b)
	t.Cleanup(func() { _ = c.Close(); _ = b.Close() })
	return c
}

// TestTransactionPoolerRefused: behind PgBouncer with pool_mode =
// transaction, a session advisory lock would stay on a server connection
// that the next client's transaction gets. The backend finds out when it
// opens its holder session and refuses every lock with
// ErrTransactionPooler, at once.
func TestTransactionPoolerRefused(t *testing.T) {
	for _, mode := range []string{"transaction", "statement"} {
		t.Run(mode, func(t *testing.T) {
			c := bouncedClient(t, mode)
			start := time.Now()
			_, err := c.Acquire(ctxT(t, 30*time.Second), "k", lockx.WithWait(10*time.Second))
			if !errors.Is(err, pglock.ErrTransactionPooler) || !errors.Is(err, errors.ErrUnsupported) {
				t.Fatalf("Acquire through a %s pooler: %v; want ErrTransactionPooler (and errors.ErrUnsupported)", mode, err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("refused after %v, want at once", d)
			}
			t.Logf("refused in %v: %v", time.Since(start).Round(time.Millisecond), err)
		})
	}
}

// TestSessionPoolerAccepted: a session-mode pool keeps a server connection
// to one client for the client's whole session, so session locks are safe
// through it and the backend works: a lock is exclusive and handed over.
func TestSessionPoolerAccepted(t *testing.T) {
	c := bouncedClient(t, "session")
	ctx := ctxT(t, 30*time.Second)
	l, err := c.Acquire(ctx, "k")
	if err != nil {
		t.Fatalf("Acquire through a session pooler: %v", err)
	}
	if _, err := c.TryAcquire(ctx, "k"); !errors.Is(err, lockx.ErrNotAcquired) {
		t.Fatalf("second holder: %v, want ErrNotAcquired", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l, err = c.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatalf("after the release: %v", err)
	}
	_ = l.Release(ctx)
}
