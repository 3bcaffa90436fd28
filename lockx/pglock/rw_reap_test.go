package pglock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// TestRWReleaseDuringReap: a reader's Release while its lease timer's
// release (the reap) is in flight must not unlock twice. Shared advisory
// locks count per session, so the second unlock freed another reader's
// reference on the same session, and a writer elsewhere was granted beside
// that reader (found by TestRapidRW). The reap is held in flight by a
// transaction that locks the reader's row, so the order is certain.
func TestRWReleaseDuringReap(t *testing.T) {
	e := newEnv(t, 10)
	b := e.backend(t)
	ctx := ctxT(t, 20*time.Second)
	const key = "rw-reap"
	a, short := lockx.NewOwner(), lockx.NewOwner()
	req := func(owner lockx.Owner, lease time.Duration) driver.Request {
		return driver.Request{Key: key, Owner: owner, Lease: lease}
	}
	if r, err := b.AcquireRW(ctx, driver.ModeRead, req(a, 30*time.Second)); err != nil || !r.Acquired {
		t.Fatalf("reader a: %+v %v", r, err)
	}
	if r, err := b.AcquireRW(ctx, driver.ModeRead, req(short, 300*time.Millisecond)); err != nil || !r.Acquired {
		t.Fatalf("reader short: %+v %v", r, err)
	}
	// Lock short's row, so that its reap blocks once its lease timer fires.
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	var n int
	if err := tx.QueryRow(ctx, "SELECT count(*) FROM (SELECT 1 FROM "+pgx.Identifier{e.schema, "lockx_pattern_held"}.Sanitize()+
		" WHERE owner = $1 FOR UPDATE) r", []byte(short)).Scan(&n); err != nil || n != 1 {
		t.Fatalf("lock short's row: %d rows, %v", n, err)
	}
	// Wait until the reap waits for that row lock.
	for deadline := time.Now().Add(10 * time.Second); ; {
		var waiting bool
		if err := e.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock' AND pid <> $2)`, e.schema, tx.Conn().PgConn().PID()).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the reap of the short reader never waited for its row")
		}
		time.Sleep(20 * time.Millisecond)
	}
	released := make(chan error, 1)
	go func() { released <- b.ReleaseRW(context.Background(), driver.ModeRead, key, short) }()
	time.Sleep(200 * time.Millisecond) // the release is decided (and, unfixed, queued behind the reap)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-released; err != nil && !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("release of the short reader: %v", err)
	}
	// Reader a still holds: a writer through another Backend is refused.
	other := e.backend(t)
	r, err := other.AcquireRW(ctx, driver.ModeWrite, req(lockx.NewOwner(), time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if r.Acquired {
		t.Fatalf("writer granted (token %d) while reader a holds", r.Token)
	}
	if err := b.ReleaseRW(ctx, driver.ModeRead, key, a); err != nil {
		t.Fatalf("release of reader a: %v", err)
	}
}
