package mysqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/mysqllock"
)

// shortWaitDB opens the test database with a session wait_timeout of
// seconds on every connection (the driver sets DSN parameters it does not
// know as session variables): the server closes a connection idle that
// long, and a GET_LOCK held on it goes with it.
func shortWaitDB(t *testing.T, seconds string) *sql.DB {
	t.Helper()
	dsn := testenv.MySQLDSN(t)
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	db, err := sql.Open("mysql", dsn+sep+"parseTime=true&wait_timeout="+seconds)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// TestWaitTimeoutLoss: the holder session idles past wait_timeout (1 s)
// between health pings (every 3 s, so the ping comes too late); the server
// closes it and frees the lock. The next ping finds the session dead and
// the lock is reported lost — Lost fires, the context's cause is ErrLost,
// Release says so — while another process can take the lock.
func TestWaitTimeoutLoss(t *testing.T) {
	db, prefix := openDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	holder := lockx.New(mysqllock.New(shortWaitDB(t, "1"), mysqllock.WithTablePrefix(prefix), mysqllock.WithHealthInterval(3*time.Second)))
	defer holder.Close()
	other := lockx.New(mysqllock.New(db, fastOpts(prefix)...))
	defer other.Close()

	l, err := holder.Acquire(ctx, "idle", lockx.WithWatchdog(60*time.Second)) // renewed every 20 s: too late to help
	if err != nil {
		t.Fatal(err)
	}
	taken := time.Now()
	select {
	case <-l.Lost():
		t.Logf("lost %v after the grant (wait_timeout 1 s, health pings every 3 s)", time.Since(taken).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("the lock freed by wait_timeout was not reported lost within 10 s")
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, lockx.ErrLost) {
		t.Fatalf("context cause %v, want ErrLost", cause)
	}
	l2, err := other.TryAcquire(ctx, "idle")
	if err != nil {
		t.Fatalf("another process after the loss: %v", err)
	}
	defer l2.Release(ctx)
	if err := l.Release(ctx); !errors.Is(err, lockx.ErrLost) && !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("the lost lock's Release: %v, want ErrLost or ErrNotHeld", err)
	}
}

// TestWaitTimeoutHealthKeepsSession: with health pings (200 ms) well inside
// wait_timeout (2 s), the idle holder session never times out: the lock is
// still held, and exclusive, three wait_timeouts later.
func TestWaitTimeoutHealthKeepsSession(t *testing.T) {
	db, prefix := openDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	holder := lockx.New(mysqllock.New(shortWaitDB(t, "2"), fastOpts(prefix)...))
	defer holder.Close()
	other := lockx.New(mysqllock.New(db, fastOpts(prefix)...))
	defer other.Close()
	l, err := holder.Acquire(ctx, "idle", lockx.WithWatchdog(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
		t.Fatalf("lost: %v", context.Cause(l.Context()))
	case <-time.After(6 * time.Second):
	}
	if _, err := other.TryAcquire(ctx, "idle"); !errors.Is(err, lockx.ErrNotAcquired) {
		t.Fatalf("another process while the holder's pinged session lives: %v, want ErrNotAcquired", err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
