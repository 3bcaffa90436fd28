package pglock_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/pglock"
)

// 64 goroutines on four clients take eight keys over and over: never two
// holders of one key at once, and every grant's token is greater than the
// key's previous one.
func TestManyGoroutinesNoOverlap(t *testing.T) {
	e := newEnv(t, 40)
	// 64 × 1000 takes about a minute on 2 cores (hot keys: every grant is
	// a handoff); LOCKX_PGLOCK_FULL=1 runs it, the default keeps the
	// package fast.
	perGoroutine := 150
	if raceEnabled {
		perGoroutine = 50
	}
	if os.Getenv("LOCKX_PGLOCK_FULL") != "" {
		perGoroutine = 1000
	}
	const goroutines, keys = 64, 8
	clients := make([]*lockx.Client, 4)
	for i := range clients {
		clients[i], _ = e.client(t)
	}
	type keyState struct {
		inside atomic.Int32
		mu     sync.Mutex
		last   lockx.Token
	}
	states := make([]keyState, keys)
	var grants atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[g%len(clients)]
			for i := 0; i < perGoroutine; i++ {
				k := (g + i) % keys
				l, err := c.Acquire(ctxT(t, 60*time.Second), fmt.Sprintf("k%d", k), lockx.WithLease(10*time.Second))
				if err != nil {
					t.Error(err)
					return
				}
				st := &states[k]
				if n := st.inside.Add(1); n != 1 {
					t.Errorf("key %d: %d holders at once", k, n)
				}
				st.mu.Lock()
				if l.Token() <= st.last {
					t.Errorf("key %d: token %d after %d", k, l.Token(), st.last)
				}
				st.last = l.Token()
				st.mu.Unlock()
				st.inside.Add(-1)
				if err := l.Release(context.Background()); err != nil {
					t.Error(err)
					return
				}
				grants.Add(1)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d grants in %v (%.0f/s)", grants.Load(), time.Since(start), float64(grants.Load())/time.Since(start).Seconds())
}

// 1000 locks held and 100 waiters waiting cost one Backend no more than its
// holder and wait sessions plus one listener connection; one waiter queues
// on the wait session, the others are woken by NOTIFY.
func TestConnectionBudget(t *testing.T) {
	e := newEnv(t, 30)
	const sessions = 4
	holder := e.backend(t, pglock.WithSessions(sessions))
	waiters, _ := e.client(t, pglock.WithSessions(sessions))
	ctx := ctxT(t, 60*time.Second)
	owners := make([]lockx.Owner, 1000)
	var wg sync.WaitGroup
	errs := make(chan error, len(owners))
	for g := 0; g < 20; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < len(owners); i += 20 {
				owners[i] = lockx.NewOwner()
				r, err := holder.Acquire(ctx, driver.Request{Key: fmt.Sprintf("budget-%d", i), Owner: owners[i], Lease: time.Minute})
				if err == nil && !r.Acquired {
					err = fmt.Errorf("lock %d not granted", i)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := make(chan time.Time, 100)
	for i := 0; i < 100; i++ {
		go func() {
			l, err := waiters.Acquire(ctx, fmt.Sprintf("budget-%d", i), lockx.WithBackoff(10*time.Second, 10*time.Second))
			if err != nil {
				t.Error(err)
				got <- time.Time{}
				return
			}
			got <- time.Now()
			_ = l.Release(context.Background())
		}()
	}
	time.Sleep(500 * time.Millisecond) // every waiter has tried and waits
	st := e.pool.Stat()
	t.Logf("1000 held, 100 waiting: pool acquired %d, total %d", st.AcquiredConns(), st.TotalConns())
	if limit := int32(2 * (sessions + pglock.DefaultWaitSessions + 1)); st.AcquiredConns() > limit {
		t.Fatalf("%d pool connections in use by two Backends, budget %d", st.AcquiredConns(), limit)
	}
	released := time.Now()
	for i := 0; i < 100; i++ {
		if err := holder.Release(ctx, fmt.Sprintf("budget-%d", i), owners[i]); err != nil {
			t.Fatal(err)
		}
	}
	var slowest time.Duration
	for i := 0; i < 100; i++ {
		select {
		case at := <-got:
			if d := at.Sub(released); d > slowest {
				slowest = d
			}
		case <-time.After(5 * time.Second):
			t.Fatal("waiters not woken within 5 s (backoff is 10 s)")
		}
	}
	t.Logf("all 100 waiters acquired within %v of the releases", slowest)
}

// Waiters queued in PostgreSQL's lock queue on their wait sessions, with a
// wait slice so short that many waits end in a lock timeout — some in the
// same instant as the grant, which PostgreSQL then reports as a timeout
// although the session holds the lock. Every client keeps acquiring and no
// two hold the key at once: a grant hidden behind a timeout is given back,
// not left on the wait session (where the next wait would re-enter it and
// its release leave it held for ever).
func TestWaitSliceTimeouts(t *testing.T) {
	e := newEnv(t, 40)
	const clients = 6
	cs := make([]*lockx.Client, clients)
	for i := range cs {
		cs[i], _ = e.client(t, pglock.WithSessions(1), pglock.WithWaitSlice(time.Millisecond))
	}
	ctx := ctxT(t, 15*time.Second)
	var inside atomic.Int32
	var wg sync.WaitGroup
	counts := make([]int, clients)
	stop := time.Now().Add(2 * time.Second)
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				l, err := c.Acquire(ctx, "slices", lockx.WithLease(time.Minute))
				if err != nil {
					t.Errorf("client %d: %v", i, err)
					return
				}
				if inside.Add(1) > 1 {
					t.Error("two holders at once")
				}
				time.Sleep(time.Duration(i%3) * time.Millisecond)
				inside.Add(-1)
				if err := l.Release(ctx); err != nil {
					t.Errorf("client %d release: %v", i, err)
					return
				}
				counts[i]++
			}
		}()
	}
	wg.Wait()
	t.Logf("acquisitions per client: %v", counts)
	for i, n := range counts {
		if n == 0 {
			t.Errorf("client %d never acquired", i)
		}
	}
}

// serverSessions counts the server sessions of the test's schema (its
// application_name): pool, dedicated and listener connections alike.
func (e *env) serverSessions(t *testing.T, ctx context.Context) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE application_name = $1", e.schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// 1,000 waiters on one key, in one process, need no session each: the
// waiting Backend uses its holder sessions, its one wait session (where one
// waiter queues in the server's lock queue) and its listener (the others
// are woken by NOTIFY). The server sessions of the test's schema are
// counted in pg_stat_activity while all of them wait; then the waiters
// give up (a context cancelled) and none of them was granted the held key.
// Handing the key to all 1,000 in turn took 10 s here (every release wakes
// every local waiter), too long for a test.
func TestThousandWaitersOneKey(t *testing.T) {
	const waiters = 1000
	e := newEnv(t, 12)
	holder, _ := e.client(t, pglock.WithSessions(1))
	crowd, cb := e.client(t)
	ctx := ctxT(t, 60*time.Second)
	l, err := holder.Acquire(ctx, "crowd")
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	var started, granted atomic.Int64
	var wg sync.WaitGroup
	for range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			started.Add(1)
			l, err := crowd.Acquire(wctx, "crowd")
			if err == nil {
				granted.Add(1)
				_ = l.Release(context.Background())
			}
		}()
	}
	// Every waiter has started, one queues on the wait session and the
	// others listen.
	for {
		if _, wait, listening := cb.Connected(); started.Load() == waiters && wait == 1 && listening {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the waiters did not settle: no wait session or no listener")
		}
		time.Sleep(10 * time.Millisecond)
	}
	most := 0
	for range 20 {
		most = max(most, e.serverSessions(t, ctx))
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	wg.Wait()
	// Two Backends: the holder's 1 holder session, the crowd's 2 holder
	// sessions, 1 wait session and 1 listener; besides them only the test
	// pool's idle connections (Migrate's, the count's own).
	const bound = 1 + pglock.DefaultSessions + pglock.DefaultWaitSessions + 1
	idle := int(e.pool.Stat().IdleConns())
	t.Logf("%d waiters on one key: %d server sessions (Backends' bound %d, %d idle pool connections)", waiters, most, bound, idle)
	if most > bound+idle {
		t.Fatalf("%d server sessions for %d waiters, bound %d + %d idle pool connections", most, waiters, bound, idle)
	}
	if n := granted.Load(); n != 0 {
		t.Fatalf("%d waiters were granted a key that was held all along", n)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
