package pglock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/pglock"
)

// A transaction lock excludes session locks and other transactions until
// commit or rollback, and its token is ordered with the session tokens.
func TestTxLockEndsWithTransaction(t *testing.T) {
	e := newEnv(t, 20)
	c, b := e.client(t)
	if err := b.Connect(ctxT(t, 5*time.Second)); err != nil { // creates the schema
		t.Fatal(err)
	}
	ctx := ctxT(t, 20*time.Second)
	for _, commit := range []bool{true, false} {
		tx, err := e.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback(context.Background()) }) // a no-op after commit
		tok, err := pglock.TxLock(ctx, tx, "order:1", pglock.WithSchema(e.schema))
		if err != nil {
			t.Fatal(err)
		}
		tx2, err := e.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx2.Rollback(context.Background()) })
		if _, err := b.TryTxLock(ctx, tx2, "order:1"); !errors.Is(err, lockx.ErrNotAcquired) {
			t.Fatalf("TryTxLock in a second transaction = %v, want ErrNotAcquired", err)
		}
		_ = tx2.Rollback(ctx)
		if _, err := c.TryAcquire(ctx, "order:1"); !errors.Is(err, lockx.ErrNotAcquired) {
			t.Fatalf("session TryAcquire during the transaction = %v, want ErrNotAcquired", err)
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		l, err := c.TryAcquire(ctx, "order:1")
		if err != nil {
			t.Fatalf("commit=%v: TryAcquire after the transaction: %v", commit, err)
		}
		if l.Token() <= tok {
			t.Fatalf("session token %d not greater than the transaction's %d", l.Token(), tok)
		}
		// A session lock blocks TryTxLock in turn.
		tx3, err := e.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx3.Rollback(context.Background()) })
		if _, err := pglock.TryTxLock(ctx, tx3, "order:1", pglock.WithSchema(e.schema)); !errors.Is(err, lockx.ErrNotAcquired) {
			t.Fatalf("TryTxLock while a session holds the key = %v", err)
		}
		_ = tx3.Rollback(ctx)
		_ = l.Release(context.Background())
	}
}

func TestTxLockMissingSchema(t *testing.T) {
	e := newEnv(t, 5)
	ctx := ctxT(t, 10*time.Second)
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = pglock.TxLock(ctx, tx, "k", pglock.WithSchema(e.schema))
	if err == nil || errors.Is(err, lockx.ErrUnavailable) {
		t.Fatalf("TxLock without schema = %v, want a missing-schema error", err)
	}
	t.Log(err)
	// The transaction is still usable.
	var one int
	if err := tx.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatalf("transaction aborted by TxLock: %v", err)
	}
}
