package httplock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/lockxd"
	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/httplock"
	"github.com/lockx-go/lockx/lockx/memlock"
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func newClient(t *testing.T, url, apiKey string, opts ...lockx.Option) *lockx.Client {
	c := lockx.New(client(t, url, apiKey), opts...)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Tenants never meet: same key names, separate locks; another tenant's
// owner id opens nothing; listings and fences are per tenant.
func TestTenantIsolation(t *testing.T) {
	url := serve(t, memlock.New())
	ctx := ctxT(t, 10*time.Second)
	a, b := newClient(t, url, "key-a"), newClient(t, url, "key-b")
	la, err := a.Acquire(ctx, "shared")
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.TryAcquire(ctx, "shared")
	if err != nil {
		t.Fatalf("tenant b blocked by tenant a's lock of the same name: %v", err)
	}
	bb := client(t, url, "key-b")
	if err := bb.Release(ctx, "shared", la.Owner()); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("b releasing a's lock with a's owner id: %v", err)
	}
	if err := bb.Extend(ctx, "shared", la.Owner(), time.Minute); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("b extending a's lock: %v", err)
	}
	if _, err := bb.TTL(ctx, "shared", la.Owner()); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("b reading a's lease: %v", err)
	}
	for _, k := range []string{"../a/shared", "lockxd/a/shared", "/shared"} {
		if err := bb.Release(ctx, k, la.Owner()); !errors.Is(err, lockx.ErrNotHeld) {
			t.Fatalf("b releasing %q: %v", k, err)
		}
	}
	info, err := bb.Lock(ctx, "shared")
	if err != nil || info.Owner != lockxd.Holder("b", lb.Owner()) || info.Key != "shared" {
		t.Fatalf("b's view of shared: %+v, %v (want b's own hold)", info, err)
	}
	var seen []lockx.LockInfo
	if err := bb.Locks(ctx, "", func(li lockx.LockInfo) bool { seen = append(seen, li); return true }); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0].Owner != lockxd.Holder("b", lb.Owner()) {
		t.Fatalf("b's listing %+v shows more than its own lock", seen)
	}
	// Fences: a's high token on a resource does not fence b's resource of
	// the same name.
	aa := client(t, url, "key-a")
	if err := aa.Fence(ctx, "res", 100); err != nil {
		t.Fatal(err)
	}
	if err := bb.Fence(ctx, "res", 5); err != nil {
		t.Fatalf("b's fence saw a's token: %v", err)
	}
	var stale *lockx.StaleTokenError
	if err := aa.Fence(ctx, "res", 99); !errors.As(err, &stale) || stale.Seen != 100 {
		t.Fatalf("stale token through lockxd: %v", err)
	}
	if err := la.Release(ctx); err != nil {
		t.Fatalf("a's lock after b's attempts: %v", err)
	}
	if err := lb.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// Quotas and rate limits reach the Go client as ErrUnavailable carrying
// lockxd's 429.
func TestQuotaAndRateLimit(t *testing.T) {
	url := serve(t, memlock.New())
	ctx := ctxT(t, 10*time.Second)
	q := newClient(t, url, "key-q", lockx.WithLease(30*time.Second))
	for i := range 2 {
		if _, err := q.TryAcquire(ctx, fmt.Sprint("q", i)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := q.TryAcquire(ctx, "q2")
	var he *httplock.Error
	if !errors.Is(err, lockx.ErrUnavailable) || !errors.As(err, &he) || he.Status != http.StatusTooManyRequests || he.Code != "quota" || he.RetryAfter <= 0 {
		t.Fatalf("third lock over max_held 2: %v", err)
	}
	// Rate 2/s, burst 4: a quick run of calls is cut off with Retry-After.
	r := client(t, url, "key-r")
	var limited *httplock.Error
	for i := 0; i < 10 && limited == nil; i++ {
		_, err := r.TTL(ctx, "x", "o")
		if errors.As(err, &he) && he.Code == "rate-limited" {
			limited = he
		} else if !errors.Is(err, lockx.ErrNotHeld) {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if limited == nil || limited.Status != http.StatusTooManyRequests || limited.RetryAfter <= 0 {
		t.Fatalf("no 429 with Retry-After from the rate limit: %+v", limited)
	}
	// Unknown keys are refused, and say so.
	_, err = client(t, url, "nobody").TTL(ctx, "x", "o")
	if !errors.As(err, &he) || he.Status != http.StatusUnauthorized {
		t.Fatalf("bad API key: %v", err)
	}
}

// holdEnv names the environment of the child process of
// TestKilledClientLosesLock.
const holdEnv = "HTTPLOCK_TEST_HOLD"

// TestHoldInChild is the child of TestKilledClientLosesLock: it takes the
// lock through lockxd with a watchdog, says so, and holds it until killed.
func TestHoldInChild(t *testing.T) {
	spec := os.Getenv(holdEnv)
	if spec == "" {
		t.Skip("child process of TestKilledClientLosesLock")
	}
	url, key, _ := strings.Cut(spec, " ")
	c := lockx.New(httplock.New(url, "key-a"))
	defer c.Close()
	l, err := c.Acquire(context.Background(), key, lockx.WithWatchdog(2*time.Second))
	if err != nil {
		fmt.Println("error", err)
		return
	}
	fmt.Println("held", l.Token())
	<-l.Lost() // held until killed (or lost, which the parent then sees)
	fmt.Println("lost")
}

// A client process killed mid-hold (SIGKILL: no release, no goodbye) loses
// its lock after its lease, and a waiter gets it with a greater token.
func TestKilledClientLosesLock(t *testing.T) {
	for _, bc := range backends() {
		t.Run(bc.name, func(t *testing.T) {
			t.Parallel()
			url := serve(t, bc.new(t))
			key := fmt.Sprintf("killed-%d", time.Now().UnixNano())
			cmd := exec.Command(os.Args[0], "-test.run=^TestHoldInChild$", "-test.v")
			cmd.Env = append(os.Environ(), holdEnv+"="+url+" "+key)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			lines := bufio.NewScanner(out)
			var token lockx.Token
			for lines.Scan() {
				if _, err := fmt.Sscanf(lines.Text(), "held %d", &token); err == nil {
					break
				}
			}
			if token == 0 {
				t.Fatal("child did not take the lock")
			}
			c := newClient(t, url, "key-a")
			// Alive, the child keeps its 2 s lease going past its end.
			if _, err := c.Acquire(ctxT(t, 10*time.Second), key, lockx.WithWait(3*time.Second)); !errors.Is(err, lockx.ErrNotAcquired) {
				t.Fatalf("lock of a live child: %v", err)
			}
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			l, err := c.Acquire(ctxT(t, 15*time.Second), key, lockx.WithWait(10*time.Second))
			if err != nil {
				t.Fatalf("lock of a killed child not freed by its lease: %v", err)
			}
			if l.Token() <= token {
				t.Fatalf("token %d after the killed child's %d", l.Token(), token)
			}
			_ = l.Release(context.Background())
		})
	}
}

// restartable is a lockxd on a fixed loopback address that can be stopped
// and started again over a new backend connection to the same store.
type restartable struct {
	t    *testing.T
	addr string
	hs   *http.Server
	srv  *lockxd.Server
	stop func() // closes the backend
}

func (r *restartable) start(b driver.Backend, closeBackend func()) {
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		r.t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	r.srv = lockxd.NewServer(b, lockxd.Config{Tenants: tenants()})
	r.hs = &http.Server{Handler: r.srv}
	r.stop = closeBackend
	go func() { _ = r.hs.Serve(ln) }()
}

// kill stops the server as a crash would: connections cut, backend
// connections closed, nothing handed over.
func (r *restartable) kill() {
	r.srv.Shutdown()
	_ = r.hs.Close()
	r.stop()
}

// lockxd restarted while a client holds a lock: with Redis the lock lives
// on (state is in Redis), the client's watchdog reconnects and keeps it.
// With PostgreSQL the plain lock dies with lockxd's sessions — the client
// is told (Lost) — while semaphore permits, rows in PostgreSQL, live on.
func TestServerRestartMidHold(t *testing.T) {
	prefix := fmt.Sprintf("httplock-restart:%d:", time.Now().UnixNano())
	openRedis := func() (driver.Backend, func()) {
		rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
		b := redislockNew(rdb, prefix)
		return b, func() { _ = b.Close(); _ = rdb.Close() }
	}
	ns := fmt.Sprintf("httplock-restart-%d", time.Now().UnixNano())
	openPG := func() (driver.Backend, func()) {
		pool, err := pgxpool.New(context.Background(), testenv.PostgresURL(t))
		if err != nil {
			t.Fatal(err)
		}
		b := pglockNew(pool, ns)
		return b, func() { _ = b.Close(); pool.Close() }
	}
	t.Run("redis", func(t *testing.T) {
		r := &restartable{t: t, addr: "127.0.0.1:0"}
		r.start(openRedis())
		t.Cleanup(r.kill)
		url := "http://" + r.addr
		c := newClient(t, url, "key-a")
		l, err := c.Acquire(ctxT(t, 5*time.Second), "kept", lockx.WithWatchdog(1500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		r.kill()
		time.Sleep(300 * time.Millisecond) // down, while the watchdog tries
		r.start(openRedis())
		// Two leases later the hold is still ours and still exclusive.
		other := newClient(t, url, "key-a")
		if _, err := other.Acquire(ctxT(t, 10*time.Second), "kept", lockx.WithWait(3*time.Second)); !errors.Is(err, lockx.ErrNotAcquired) {
			t.Fatalf("lock after the restart: %v", err)
		}
		select {
		case <-l.Lost():
			t.Fatalf("lock lost across the restart: %v", context.Cause(l.Context()))
		default:
		}
		if err := l.Release(ctxT(t, 5*time.Second)); err != nil {
			t.Fatalf("release after the restart: %v", err)
		}
	})
	t.Run("postgres", func(t *testing.T) {
		r := &restartable{t: t, addr: "127.0.0.1:0"}
		r.start(openPG())
		t.Cleanup(r.kill)
		url := "http://" + r.addr
		c := newClient(t, url, "key-a")
		l, err := c.Acquire(ctxT(t, 5*time.Second), "session", lockx.WithWatchdog(1500*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		hb := client(t, url, "key-a")
		permit := driver.PermitRequest{Request: driver.Request{Key: "pool", Owner: lockx.NewOwner(), Lease: time.Minute}, Limit: 1, Count: 1}
		if res, err := hb.AcquirePermits(ctxT(t, 5*time.Second), permit); err != nil || !res.Acquired {
			t.Fatalf("permit: %+v %v", res, err)
		}
		r.kill()
		r.start(openPG())
		select {
		case <-l.Lost():
		case <-time.After(5 * time.Second):
			t.Fatal("the client was not told that its session lock died with lockxd")
		}
		if err := hb.ExtendPermits(ctxT(t, 5*time.Second), "pool", permit.Owner, time.Minute); err != nil {
			t.Fatalf("permit after the restart: %v", err)
		}
		if err := hb.ReleasePermits(ctxT(t, 5*time.Second), "pool", permit.Owner); err != nil {
			t.Fatal(err)
		}
	})
}

// bare hides every optional capability of a backend.
type bare struct{ driver.Backend }

// Over a backend that cannot notify, watch answers 501 once, the client
// stops asking, and waiters still get the lock (by backoff).
func TestWithoutNotifier(t *testing.T) {
	url := serve(t, bare{memlock.New()})
	hb := client(t, url, "key-a")
	ctx := ctxT(t, 10*time.Second)
	for i := range 2 {
		_, _, err := hb.Watch(ctx, "k", "o")
		var he *httplock.Error
		if !errors.Is(err, lockx.ErrUnavailable) || (i == 0) != errors.As(err, &he) {
			t.Fatalf("watch %d over a backend without Notifier: %v", i, err)
		}
	}
	c := lockx.New(hb)
	defer c.Close()
	l, err := c.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(100 * time.Millisecond); _ = l.Release(context.Background()) }()
	l2, err := newClient(t, url, "key-a").Acquire(ctx, "k", lockx.WithBackoff(10*time.Millisecond, 50*time.Millisecond))
	if err != nil {
		t.Fatalf("waiter without wake-ups: %v", err)
	}
	_ = l2.Release(ctx)
}

// dialCounter counts the connections an HTTP client opens.
func dialCounter(n *atomic.Int64) *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DialContext: func(ctx context.Context, nw, addr string) (net.Conn, error) {
		n.Add(1)
		return (&net.Dialer{}).DialContext(ctx, nw, addr)
	}}}
}

// Waiting does not cost connections: a watch stream that is no longer
// needed is ended by the server on request, so its connection serves the
// next call (with TLS, a handshake saved per wait).
func TestWatchKeepsConnections(t *testing.T) {
	url := serve(t, memlock.New())
	var dials atomic.Int64
	const clients, rounds = 3, 30
	var wg sync.WaitGroup
	for range clients {
		c := lockx.New(httplock.New(url, "key-a", httplock.WithHTTPClient(dialCounter(&dials))))
		t.Cleanup(func() { _ = c.Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				l, err := c.Acquire(ctxT(t, 10*time.Second), "conn", lockx.Fair())
				if err != nil {
					t.Error(err)
					return
				}
				time.Sleep(time.Millisecond)
				_ = l.Release(context.Background())
			}
		}()
	}
	wg.Wait()
	// Each client needs a few connections at once (a call, its watch, a
	// cancel); one per acquisition would be clients*rounds.
	if n := dials.Load(); n > clients*rounds/3 {
		t.Fatalf("%d connections opened for %d contended acquisitions", n, clients*rounds)
	}
}
