package pglock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/pglock"
)

// A pool pointed at a server that is down: a typed ErrUnavailable, fast.
func TestServerDown(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	c := lockx.New(pglock.New(pool))
	defer c.Close()
	start := time.Now()
	_, err = c.TryAcquire(ctxT(t, 10*time.Second), "k")
	if !errors.Is(err, lockx.ErrUnavailable) {
		t.Fatalf("TryAcquire against a closed port = %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("took %v to fail", d)
	}
	t.Logf("failed in %v: %v", time.Since(start), err)
	_, err = c.Acquire(ctxT(t, 300*time.Millisecond), "k")
	if !errors.Is(err, lockx.ErrNotAcquired) || !errors.Is(err, lockx.ErrUnavailable) {
		t.Fatalf("Acquire = %v, want ErrNotAcquired with the last ErrUnavailable", err)
	}
}

// A role that may not create the schema gets an error naming the right.
func TestMissingCreatePrivilege(t *testing.T) {
	e := newEnv(t, 5)
	role := "lockx_noright_" + randHex(4)
	admin := e.pool
	ctx := ctxT(t, 20*time.Second)
	if _, err := admin.Exec(ctx, "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(e.dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.User = role
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pool.Close()
		_, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+pgx.Identifier{role}.Sanitize())
	})
	err = pglock.Migrate(ctx, pool, pglock.WithSchema(e.schema))
	if err == nil || !strings.Contains(err.Error(), "CREATE privilege on the database") {
		t.Fatalf("Migrate as %s = %v, want the missing CREATE privilege named", role, err)
	}
	t.Log(err)
	b := pglock.New(pool, pglock.WithSchema(e.schema))
	defer b.Close()
	_, err = lockx.New(b).TryAcquire(ctx, "k")
	if !errors.Is(err, lockx.ErrUnavailable) || !strings.Contains(err.Error(), "CREATE privilege") {
		t.Fatalf("TryAcquire as %s = %v", role, err)
	}
	// With the schema created by a privileged role but no rights on it,
	// the error names the rights the role lacks.
	if err := pglock.Migrate(ctx, admin, pglock.WithSchema(e.schema)); err != nil {
		t.Fatal(err)
	}
	b2 := pglock.New(pool, pglock.WithSchema(e.schema))
	defer b2.Close()
	_, err = b2.Acquire(ctx, driver.Request{Key: "k", Owner: lockx.NewOwner(), Lease: time.Second})
	if !errors.Is(err, lockx.ErrUnavailable) || !strings.Contains(err.Error(), "lacks USAGE") {
		t.Fatalf("Acquire without rights on the schema = %v", err)
	}
	t.Log(err)
}

// A waiter whose backoff is 5 s acquires within a fraction of it after a
// release in another process: NOTIFY, not polling.
func TestWakeUpByNotify(t *testing.T) {
	e := newEnv(t, 20)
	c1, _ := e.client(t)
	c2, _ := e.client(t)
	for _, fair := range []bool{false, true} {
		opts := []lockx.Option{lockx.WithBackoff(5*time.Second, 5*time.Second)}
		if fair {
			opts = append(opts, lockx.Fair(), lockx.WithQueueTTL(time.Minute))
		}
		l, err := c1.Acquire(ctxT(t, 5*time.Second), "wake", opts...)
		if err != nil {
			t.Fatal(err)
		}
		d := testenv.HandOver(t, 300*time.Millisecond, func() error { return l.Release(context.Background()) }, func() error {
			l2, err := c2.Acquire(ctxT(t, 20*time.Second), "wake", opts...)
			if err == nil {
				err = l2.Release(context.Background())
			}
			return err
		})
		t.Logf("fair=%v: woken %v after release", fair, d)
		if d > time.Second {
			t.Fatalf("fair=%v: woken after %v", fair, d)
		}
	}
}

// A plain waiter refused by the key's holder queues in PostgreSQL's lock
// queue on its wait session within the same Acquire: the server hands the
// lock over on release, and the waiting process needs no notification, so
// its listener is never connected. A waiting Acquire connects the wait
// session ahead of contention. (The wait slice is longer than the wait
// here: a wait that outlasts its slice goes back to the Client, which then
// watches.)
//
// It holds with pgxpool's default MaxConns too (4 on this machine's cores;
// the test fixes 4): the wait session is then a dedicated connection, not a
// pool one, so the waiter still queues in the server instead of waiting by
// notification. With the wait session taken from the pool only (the
// behaviour before dedicated wait sessions) the pool of 4 leaves none and
// the subtest fails on "did not connect the wait session".
func TestFirstWaitQueuesOnWaitSession(t *testing.T) {
	for _, conns := range []int32{20, 4} {
		t.Run(fmt.Sprintf("MaxConns=%d", conns), func(t *testing.T) { firstWaitQueues(t, conns) })
	}
}

func firstWaitQueues(t *testing.T, conns int32) {
	e := newEnv(t, conns)
	holder, _ := e.client(t)
	waiter, wb := e.client(t, pglock.WithWaitSlice(time.Minute))
	ctx := ctxT(t, 20*time.Second)
	warm, err := waiter.Acquire(ctx, "first-wait-warm")
	if err != nil {
		t.Fatal(err)
	}
	if err := warm.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		if _, wait, _ := wb.Connected(); wait == pglock.DefaultWaitSessions {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a waiting Acquire did not connect the wait session")
		}
		time.Sleep(10 * time.Millisecond)
	}
	l, err := holder.Acquire(ctx, "first-wait")
	if err != nil {
		t.Fatal(err)
	}
	d := testenv.HandOver(t, 300*time.Millisecond, func() error { return l.Release(ctx) }, func() error {
		l2, err := waiter.Acquire(ctx, "first-wait", lockx.WithBackoff(10*time.Second, 10*time.Second))
		if err == nil {
			err = l2.Release(context.Background())
		}
		return err
	})
	t.Logf("handed over %v after the release", d)
	if _, _, listening := wb.Connected(); listening {
		t.Fatal("the waiter's Backend connected its listener: the wait went by notification, not by the server's lock queue")
	}
}

// Shared holds coexist, exclude exclusive ones within a process and across
// processes, and are released one owner at a time.
// A grant on a wait session keeps its key marked as contended, although its
// waiter was refused more than hotFor (1 s) ago: on a hot key whose waiters
// all queue in the server none is refused any more, and a mark that lapsed
// sent every waiter's next attempt to the holder session first, to be
// refused there and queue at the back.
func TestWaitGrantKeepsKeyContended(t *testing.T) {
	e := newEnv(t, 20)
	holder, _ := e.client(t)
	waiter, wb := e.client(t, pglock.WithWaitSlice(time.Minute))
	ctx := ctxT(t, 20*time.Second)
	l, err := holder.Acquire(ctx, "queued")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *lockx.Lock, 1)
	go func() {
		l2, err := waiter.Acquire(ctx, "queued", lockx.WithBackoff(10*time.Second, 10*time.Second))
		if err != nil {
			t.Error(err)
		}
		got <- l2
	}()
	// Refused, the waiter queues in the server; the refusal's mark lapses.
	waitBlocked(t, e)
	time.Sleep(1200 * time.Millisecond)
	if wb.Contended("queued") {
		t.Fatal("the refusal's mark did not lapse after 1.2 s")
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
	l2 := <-got
	if l2 == nil {
		t.FailNow()
	}
	defer l2.Release(context.Background())
	if l2.Token() <= l.Token() {
		t.Fatalf("token %d after %d", l2.Token(), l.Token())
	}
	if !wb.Contended("queued") {
		t.Fatal("a grant on a wait session left its key unmarked: the next wait tries on the holder session first")
	}
}

// waitBlocked waits until a session of e's schema waits for an advisory
// lock in the server, and returns its pid.
func waitBlocked(t *testing.T, e *env) int {
	t.Helper()
	q := `SELECT a.pid FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND NOT l.granted AND a.application_name = $1`
	deadline := time.Now().Add(5 * time.Second)
	for {
		var pid int
		err := e.pool.QueryRow(ctxT(t, 5*time.Second), q, e.schema).Scan(&pid)
		if err == nil {
			return pid
		}
		if !errors.Is(err, pgx.ErrNoRows) || time.Now().After(deadline) {
			t.Fatalf("no session waits in the server: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSharedLocks(t *testing.T) {
	e := newEnv(t, 20)
	b1 := e.backend(t)
	b2 := e.backend(t)
	ctx := ctxT(t, 10*time.Second)
	req := func(owner lockx.Owner) driver.Request {
		return driver.Request{Key: "doc", Owner: owner, Lease: 10 * time.Second}
	}
	r1, r2, r3, w := lockx.NewOwner(), lockx.NewOwner(), lockx.NewOwner(), lockx.NewOwner()
	for _, c := range []struct {
		b     *pglock.Backend
		owner lockx.Owner
	}{{b1, r1}, {b1, r2}, {b2, r3}} {
		res, err := c.b.AcquireShared(ctx, req(c.owner))
		if err != nil || !res.Acquired {
			t.Fatalf("AcquireShared = %+v, %v", res, err)
		}
	}
	for _, b := range []*pglock.Backend{b1, b2} {
		if res, err := b.Acquire(ctx, req(w)); err != nil || res.Acquired {
			t.Fatalf("exclusive Acquire while readers hold = %+v, %v", res, err)
		}
	}
	if _, err := b1.TTL(ctx, "doc", r1); err != nil {
		t.Fatalf("TTL of a shared hold: %v", err)
	}
	for _, c := range []struct {
		b     *pglock.Backend
		owner lockx.Owner
	}{{b1, r1}, {b1, r2}, {b2, r3}} {
		if err := c.b.Release(ctx, "doc", c.owner); err != nil {
			t.Fatalf("Release shared: %v", err)
		}
	}
	if err := b1.Release(ctx, "doc", r1); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("second Release = %v, want ErrNotHeld", err)
	}
	res, err := b2.Acquire(ctx, req(w))
	if err != nil || !res.Acquired {
		t.Fatalf("exclusive Acquire after readers left = %+v, %v", res, err)
	}
	if res, err := b1.AcquireShared(ctx, req(r1)); err != nil || res.Acquired {
		t.Fatalf("AcquireShared while a writer holds = %+v, %v", res, err)
	}
	_ = b2.Release(ctx, "doc", w)
}

// The schema and its objects are quoted: odd schema names work.
func TestOddSchemaName(t *testing.T) {
	e := newEnv(t, 10)
	e.schema = `Odd "schema"; ` + randHex(3)
	c, _ := e.client(t)
	l, err := c.Acquire(ctxT(t, 10*time.Second), "k")
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Release(context.Background())
}
