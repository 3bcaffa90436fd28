package mysqllock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/mysqllock"
)

// TestKillHolderSession kills the holder's session on the server (as an
// operator's KILL, a failover or a proxy would): the health check or the
// watchdog's next Extend must report the lock lost, and a waiter in
// another Backend must get it.
func TestKillHolderSession(t *testing.T) {
	db, prefix := openDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	holder := lockx.New(mysqllock.New(db, fastOpts(prefix)...))
	defer holder.Close()
	waiter := lockx.New(mysqllock.New(db, fastOpts(prefix)...))
	defer waiter.Close()

	// A 30 s watchdog renews every 10 s: only the health check and
	// NotifyLoss can report the loss within the 3 s allowed below.
	l, err := holder.Acquire(ctx, "kill:me", lockx.WithWatchdog(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *lockx.Lock, 1)
	go func() {
		l2, err := waiter.Acquire(ctx, "kill:me", lockx.WithBackoff(5*time.Second, 5*time.Second))
		if err != nil {
			t.Error(err)
		}
		got <- l2
	}()
	time.Sleep(200 * time.Millisecond)
	var conn int64
	if err := db.QueryRowContext(ctx, "SELECT conn FROM `"+prefix+"fence` WHERE owner = ?", string(l.Owner())).Scan(&conn); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "KILL CONNECTION ?", conn); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	select {
	case <-l.Lost():
		t.Logf("Lost %v after KILL", time.Since(killed))
	case <-time.After(3 * time.Second):
		t.Fatal("Lost did not fire after the holder's session was killed")
	}
	select {
	case l2 := <-got:
		if l2 == nil {
			return
		}
		t.Logf("waiter acquired %v after KILL", time.Since(killed))
		if l2.Token() <= l.Token() {
			t.Errorf("waiter token %d not above %d", l2.Token(), l.Token())
		}
		_ = l2.Release(context.Background())
	case <-time.After(5 * time.Second):
		t.Fatal("waiter did not acquire after the holder's session was killed")
	}
	// The Backend pins a new session and keeps working.
	l3, err := holder.Acquire(ctx, "kill:again")
	if err != nil {
		t.Fatalf("Acquire after a killed session: %v", err)
	}
	_ = l3.Release(ctx)
}

func TestRefusalReportsHolderTTL(t *testing.T) {
	db, prefix := openDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, mode := range []string{"session", "table"} {
		newB := func() driver.Backend {
			if mode == "session" {
				return mysqllock.New(db, fastOpts(prefix)...)
			}
			return mysqllock.NewTable(db, fastOpts(prefix)...)
		}
		a, b := newB(), newB()
		k := "ttl:" + mode + ":" + strings.Repeat("x", 300) // long keys are hashed
		r, err := a.Acquire(ctx, driver.Request{Key: k, Owner: lockx.NewOwner(), Lease: 5 * time.Second})
		if err != nil || !r.Acquired {
			t.Fatalf("%s: %+v %v", mode, r, err)
		}
		r2, err := b.Acquire(ctx, driver.Request{Key: k, Owner: lockx.NewOwner(), Lease: time.Second})
		if err != nil || r2.Acquired {
			t.Fatalf("%s: second owner: %+v %v", mode, r2, err)
		}
		if r2.TTL < 4*time.Second || r2.TTL > 5*time.Second {
			t.Errorf("%s: refusal TTL %v, want the holder's ~5s", mode, r2.TTL)
		}
		_ = a.Close()
		_ = b.Close()
	}
}

func TestBadPrefix(t *testing.T) {
	b := mysqllock.NewTable(nil, mysqllock.WithTablePrefix("bad`name"))
	_, err := b.Acquire(context.Background(), driver.Request{Key: "k", Owner: "o", Lease: time.Second})
	if !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Fatalf("err = %v, want ErrInvalidArgument", err)
	}
	_ = b.Close()
}
