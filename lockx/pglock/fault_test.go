package pglock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/pglock"
)

// holderPID returns the backend pid of the session that holds key, from
// the holder's row. A hold writes its row only once it has lasted the
// publish delay, so holderPID waits for the row (up to 5 s) rather than
// read it right after the grant.
func (e *env) holderPID(t *testing.T, key string) int {
	t.Helper()
	q := "SELECT pid FROM " + pgx.Identifier{e.schema, "lockx_held"}.Sanitize() + " WHERE key = $1 AND expires > clock_timestamp()"
	deadline := time.Now().Add(5 * time.Second)
	for {
		var pid int
		err := e.pool.QueryRow(ctxT(t, 5*time.Second), q, []byte(key)).Scan(&pid)
		if err == nil {
			return pid
		}
		if !errors.Is(err, pgx.ErrNoRows) || time.Now().After(deadline) {
			t.Fatalf("holder pid of %q: %v", key, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *env) terminate(t *testing.T, pid int) {
	t.Helper()
	var ok bool
	if err := e.pool.QueryRow(ctxT(t, 5*time.Second), "SELECT pg_terminate_backend($1)", pid).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d) = %v, %v", pid, ok, err)
	}
}

// A holder session killed on the server: the holder's Lost fires (the
// Backend's health check notices, and the watchdog's next renewal reports
// ErrNotHeld), and a waiter gets the lock with a greater token.
func TestTerminateHolderSession(t *testing.T) {
	e := newEnv(t, 20)
	c1, b1 := e.client(t)
	c2, _ := e.client(t)
	const key = "terminate-me"
	l, err := c1.Acquire(ctxT(t, 5*time.Second), key, lockx.WithWatchdog(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	lossSignal := make(chan struct{})
	stop := b1.NotifyLoss(key, l.Owner(), func() { close(lossSignal) })
	defer stop()
	got := make(chan *lockx.Lock, 1)
	go func() {
		l2, err := c2.Acquire(ctxT(t, 15*time.Second), key, lockx.WithBackoff(5*time.Second, 5*time.Second))
		if err != nil {
			t.Error(err)
		}
		got <- l2
	}()
	time.Sleep(100 * time.Millisecond)
	killed := time.Now()
	e.terminate(t, e.holderPID(t, key))

	select {
	case <-lossSignal:
		t.Logf("backend reported the loss after %v", time.Since(killed))
	case <-time.After(2500 * time.Millisecond):
		t.Fatal("NotifyLoss did not fire within the health interval")
	}
	select {
	case <-l.Lost():
		t.Logf("Lost fired after %v", time.Since(killed))
	case <-time.After(3 * time.Second):
		t.Fatal("holder's Lost did not fire")
	}
	if !errors.Is(context.Cause(l.Context()), lockx.ErrLost) {
		t.Fatalf("cause = %v", context.Cause(l.Context()))
	}
	select {
	case l2 := <-got:
		if l2 == nil {
			return
		}
		t.Logf("waiter acquired after %v", time.Since(killed))
		if l2.Token() <= l.Token() {
			t.Fatalf("waiter token %d not greater than %d", l2.Token(), l.Token())
		}
		_ = l2.Release(context.Background())
	case <-time.After(5 * time.Second):
		t.Fatal("waiter did not acquire after the holder's session died")
	}
	// The backend recovers: a new session serves new locks.
	l3, err := c1.Acquire(ctxT(t, 5*time.Second), key+"-after")
	if err != nil {
		t.Fatalf("acquire after session loss: %v", err)
	}
	_ = l3.Release(context.Background())
}

// Every session of the test is terminated (as a server restart would end
// them): tokens keep increasing afterwards, for the same key and others.
func TestTerminateAllSessionsTokensIncrease(t *testing.T) {
	e := newEnv(t, 20)
	c, _ := e.client(t)
	last := map[string]lockx.Token{}
	round := func() {
		for _, k := range []string{"a", "b", "c"} {
			l, err := c.Acquire(ctxT(t, 10*time.Second), k)
			if err != nil {
				t.Fatal(err)
			}
			if l.Token() <= last[k] {
				t.Fatalf("key %s: token %d not greater than %d", k, l.Token(), last[k])
			}
			last[k] = l.Token()
			if err := l.Release(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	round()
	l, err := c.Acquire(ctxT(t, 5*time.Second), "held-through-it")
	if err != nil {
		t.Fatal(err)
	}
	var n int
	err = e.pool.QueryRow(ctxT(t, 5*time.Second), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name = $1`, e.schema).Scan(&n)
	if err != nil || n == 0 {
		t.Fatalf("terminated %d sessions: %v", n, err)
	}
	select {
	case <-l.Lost():
	case <-time.After(35 * time.Second):
		t.Fatal("lock held through the restart was not reported lost")
	}
	// The pool may hand out a connection that died with the others before
	// noticing; the first attempts may fail as unavailable.
	if err := tryUntil(t, c, "probe", 10*time.Second); err != nil {
		t.Fatalf("backend did not recover: %v", err)
	}
	round()
}

// Cancelling waiting callers — also while their statements run on the
// session that holds other locks — never kills that session.
func TestCancelWhileWaitingKeepsSession(t *testing.T) {
	e := newEnv(t, 20)
	c, b := e.client(t, pglock.WithSessions(1))
	other, _ := e.client(t)
	held, err := c.Acquire(ctxT(t, 5*time.Second), "kept")
	if err != nil {
		t.Fatal(err)
	}
	pid := e.holderPID(t, "kept")
	busy, err := other.Acquire(ctxT(t, 5*time.Second), "busy")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rand.IntN(2000))*time.Microsecond)
				_, err := c.Acquire(ctx, "busy", lockx.WithBackoff(time.Millisecond, 2*time.Millisecond))
				cancel()
				if !errors.Is(err, lockx.ErrNotAcquired) {
					t.Errorf("Acquire of a held key = %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := e.holderPID(t, "kept"); got != pid {
		t.Fatalf("holder session changed from %d to %d", pid, got)
	}
	select {
	case <-held.Lost():
		t.Fatal("a cancelled waiter cost another lock its session")
	default:
	}
	if err := held.Extend(ctxT(t, 5*time.Second), time.Minute); err != nil {
		t.Fatalf("Extend after cancelled waits: %v", err)
	}
	if _, err := other.TryAcquire(ctxT(t, 5*time.Second), "kept"); !errors.Is(err, lockx.ErrNotAcquired) {
		t.Fatalf("kept lock acquirable by another client: %v", err)
	}
	_ = busy.Release(context.Background())
	_ = held.Release(context.Background())
	_ = b
}

// A crash or a failover empties the UNLOGGED tables and may move the fence
// sequence back below tokens already handed out (grants commit
// asynchronously). Emptying lockx_epoch stands in for that here: the next
// session moves the sequence ahead by the margin before its first grant,
// and sessions that find the marker continue without a jump.
func TestFenceGuardAfterReset(t *testing.T) {
	e := newEnv(t, 20)
	token := func() lockx.Token {
		c, _ := e.client(t, pglock.WithSessions(1))
		l, err := c.Acquire(ctxT(t, 10*time.Second), "guard")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(context.Background())
		return l.Token()
	}
	t1 := token()
	if _, err := e.pool.Exec(context.Background(), "TRUNCATE "+pgx.Identifier{e.schema, "lockx_epoch"}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	t2 := token()
	if t2 < t1+pglock.FenceMargin {
		t.Fatalf("token after a reset %d, want ≥ %d + margin %d", t2, t1, pglock.FenceMargin)
	}
	t3 := token()
	if t3 <= t2 || t3 >= t2+pglock.FenceMargin {
		t.Fatalf("token with the marker present %d, want just above %d", t3, t2)
	}
	t.Logf("tokens %d, after reset %d, then %d", t1, t2, t3)
}

// A waiter blocked in the server on its wait session reads its grant on its
// own goroutine; when its context ends it returns at once, although the
// statement waits on in the server (here for a 30 s wait slice): the read
// is cut and the session's goroutine takes it up. The session survives
// every cut (the same server process waits each time), and the grant that
// lands for a caller long gone is given back, so the key is free once its
// holder releases it.
func TestCutWaitKeepsWaitSession(t *testing.T) {
	e := newEnv(t, 20)
	holder, _ := e.client(t)
	waiter, _ := e.client(t, pglock.WithWaitSlice(30*time.Second), pglock.WithStatementTimeout(time.Minute))
	third, _ := e.client(t)
	held, err := holder.Acquire(ctxT(t, 5*time.Second), "cut")
	if err != nil {
		t.Fatal(err)
	}
	first := 0
	for i := 0; i < 5; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := waiter.Acquire(ctx, "cut")
			done <- err
		}()
		pid := waitBlocked(t, e)
		if first == 0 {
			first = pid
		} else if pid != first {
			t.Fatalf("round %d: the waiter blocks on session %d, before on %d", i, pid, first)
		}
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, lockx.ErrNotAcquired) {
				t.Fatalf("round %d: Acquire after its context ended = %v", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: Acquire did not return within 10 s of its context's end (wait slice 30 s)", i)
		}
		if i < 4 {
			// The statement still waits; the next round's waits behind it
			// only once it ends, so end it: hand the key over and back.
			_ = held.Release(context.Background())
			if err := tryUntil(t, third, "cut", 10*time.Second); err != nil {
				t.Fatalf("round %d: the late grant was not given back: %v", i, err)
			}
			if held, err = holder.Acquire(ctxT(t, 5*time.Second), "cut"); err != nil {
				t.Fatal(err)
			}
		}
	}
	_ = held.Release(context.Background())
	l, err := waiter.Acquire(ctxT(t, 10*time.Second), "cut")
	if err != nil {
		t.Fatalf("Acquire after the cut waits: %v", err)
	}
	_ = l.Release(context.Background())
}

// tryUntil tries c's lock of key until it gets it (and releases it at once)
// or d has passed, and returns the last attempt's error.
func tryUntil(t *testing.T, c *lockx.Client, key string, d time.Duration) error {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		l, err := c.TryAcquire(ctxT(t, 5*time.Second), key)
		if err == nil {
			return l.Release(context.Background())
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}
