package breaker_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/captest"
	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/breaker"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/lockxtest"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/lockx/pglock"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/lockx-go/lockx/patterns/stock/stocktest"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestConformanceMemlock(t *testing.T) {
	b := memlock.New()
	w := breaker.Wrap(b)
	lockxtest.Run(t, func(*testing.T) driver.Backend { return w })
}

// The stock capability through the breaker (memlock's stock).
func TestStockConformance(t *testing.T) {
	var sb driver.StockBackend
	if !driver.As(breaker.Wrap(memlock.New()), &sb) {
		t.Fatal("no StockBackend through the breaker")
	}
	stocktest.Run(t, sb)
}

func TestConformanceRedis(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { _ = rdb.Close() })
	prefix := fmt.Sprintf("lockxtest:breaker:%x:", rand.Uint32())
	lockxtest.Run(t, func(*testing.T) driver.Backend {
		return breaker.Wrap(redislock.New(rdb, redislock.WithPrefix(prefix)))
	})
}

// TestWrappersKeepCapabilities: Wrap of memlock, redislock and pglock
// keeps every capability of package driver that the backend has.
func TestWrappersKeepCapabilities(t *testing.T) {
	captest.Check(t, func(b driver.Backend) driver.Backend { return breaker.Wrap(b) })
}

// The cases that combos.go lost: pglock's loss notification, and the
// many-key calls of memlock and redislock.
func TestLostCapabilitiesKept(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if !driver.As(breaker.Wrap(pglock.New(pool)), new(driver.LossNotifier)) {
		t.Error("breaker.Wrap(pglock.New(pool)) is no driver.LossNotifier")
	}
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	defer rdb.Close()
	for _, b := range []driver.Backend{redislock.New(rdb), memlock.New()} {
		w := breaker.Wrap(b)
		if !driver.As(w, new(driver.ManyAcquirer)) || !driver.As(w, new(driver.ManyReleaser)) {
			t.Errorf("breaker.Wrap(%T) is no driver.ManyAcquirer and ManyReleaser", b)
		}
	}
}

// bare has no optional capability.
type bare struct{ driver.Backend }

func TestCapabilitiesForwarded(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	for _, b := range []driver.Backend{memlock.New(), bare{memlock.New()}, redislock.New(rdb)} {
		got, want := captest.Of(breaker.Wrap(b)), captest.Of(b)
		if !slices.Equal(got, want) {
			t.Errorf("Wrap(%T) has %v, want %v", b, got, want)
		}
		if br, ok := breaker.Of(breaker.Wrap(b)); !ok || br.Wrapped() != b || br.State() != "closed" {
			t.Errorf("Of(Wrap(%T)) = %v, %v", b, br, ok)
		}
	}
	if got := captest.Of(breaker.Wrap(bare{memlock.New()})); len(got) != 0 {
		t.Errorf("bare backend gained %v", got)
	}
}

// failing fails every call as a transport error would, until healed.
type failing struct {
	*memlock.Backend
	down  atomic.Bool
	calls atomic.Int64
}

var errDown = driver.Unavailable("acquire", errors.New("connection refused"))

func (f *failing) Acquire(ctx context.Context, req driver.Request) (driver.Result, error) {
	f.calls.Add(1)
	if f.down.Load() {
		return driver.Result{}, errDown
	}
	return f.Backend.Acquire(ctx, req)
}

func (f *failing) Release(ctx context.Context, key string, owner lockx.Owner) error {
	f.calls.Add(1)
	if f.down.Load() {
		return errDown
	}
	return f.Backend.Release(ctx, key, owner)
}

func TestVerdictsDoNotTrip(t *testing.T) {
	ctx := context.Background()
	var changes []string
	w := breaker.Wrap(memlock.New(), breaker.WithFailures(2),
		breaker.OnStateChange(func(_, from, to string) { changes = append(changes, from+">"+to) }))
	c := lockx.New(w)
	defer c.Close()
	var fs driver.FenceStore
	if !driver.As(w, &fs) {
		t.Fatal("no FenceStore through the breaker")
	}
	l, err := c.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := c.TryAcquire(ctx, "k"); !errors.Is(err, lockx.ErrNotAcquired) {
			t.Fatalf("TryAcquire: %v", err)
		}
		if err := w.Release(ctx, "k", lockx.NewOwner()); !errors.Is(err, lockx.ErrNotHeld) {
			t.Fatalf("Release by a stranger: %v", err)
		}
		if err := fs.Fence(ctx, "k", 1); err != nil && !errors.Is(err, lockx.ErrStaleToken) {
			t.Fatal(err)
		}
	}
	_ = l.Release(ctx)
	// Calls whose own context ended are not the backend's fault either.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	for range 5 {
		_, _ = w.Acquire(cctx, driver.Request{Key: "x", Owner: lockx.NewOwner(), Lease: time.Second})
	}
	if br, _ := breaker.Of(w); br.State() != "closed" || len(changes) != 0 {
		t.Fatalf("state %s, changes %v: verdicts tripped the breaker", br.State(), changes)
	}
}

func TestOpenFailsFastAndRecovers(t *testing.T) {
	ctx := context.Background()
	f := &failing{Backend: memlock.New()}
	var logs bytes.Buffer
	w := breaker.Wrap(f, breaker.WithFailures(3), breaker.WithOpenTimeout(100*time.Millisecond),
		breaker.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	br, _ := breaker.Of(w)
	c := lockx.New(w)
	defer c.Close()
	f.down.Store(true)
	// Each refused TryAcquire costs two failures: the attempt and the
	// release that withdraws a grant its lost reply might have hidden.
	for range 2 {
		if _, err := c.TryAcquire(ctx, "k"); !errors.Is(err, lockx.ErrUnavailable) || errors.Is(err, breaker.ErrCircuitOpen) {
			t.Fatalf("closed breaker, backend down: %v", err)
		}
	}
	if br.State() != "open" {
		t.Fatalf("state %s after 3 failures", br.State())
	}
	before := f.calls.Load()
	start := time.Now()
	// Acquire (which would wait) gives up at once on an open breaker.
	_, err := c.Acquire(ctx, "k", lockx.WithWait(5*time.Second))
	if !errors.Is(err, lockx.ErrUnavailable) || !errors.Is(err, breaker.ErrCircuitOpen) {
		t.Fatalf("open breaker: %v", err)
	}
	if d := time.Since(start); d > 50*time.Millisecond {
		t.Fatalf("open breaker: Acquire took %v", d)
	}
	if n := f.calls.Load() - before; n != 0 {
		t.Fatalf("open breaker let %d calls through", n)
	}
	f.down.Store(false)
	time.Sleep(120 * time.Millisecond) // half-open: one probe
	l, err := c.TryAcquire(ctx, "k")
	if err != nil {
		t.Fatalf("after the open timeout: %v", err)
	}
	if br.State() != "closed" {
		t.Fatalf("state %s after a successful probe", br.State())
	}
	for _, want := range []string{"level=WARN", "to=open", "to=half-open", "to=closed"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
	_ = l.Release(ctx)
}

// An open breaker refuses renewals: the lock is reported lost at the end of
// its local validity, never kept looking held.
func TestOpenBreakerLosesHeldLock(t *testing.T) {
	ctx := context.Background()
	f := &failing{Backend: memlock.New()}
	w := breaker.Wrap(f, breaker.WithFailures(1), breaker.WithOpenTimeout(time.Hour))
	c := lockx.New(w, lockx.WithWatchdog(150*time.Millisecond))
	defer c.Close()
	l, err := c.Acquire(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	f.down.Store(true)
	if _, err := c.TryAcquire(ctx, "other"); !errors.Is(err, lockx.ErrUnavailable) { // trips
		t.Fatal(err)
	}
	select {
	case <-l.Lost():
	case <-time.After(time.Second):
		t.Fatal("lock still looks held with renewals refused")
	}
	if !errors.Is(context.Cause(l.Context()), lockx.ErrLost) {
		t.Fatalf("cause %v", context.Cause(l.Context()))
	}
}

// The scenario: stop Redis under a running workload; once the
// breaker is open acquires fail fast with ErrUnavailable; restart Redis and
// the workload recovers within the open timeout.
func TestRedisOutage(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	const openTimeout = 300 * time.Millisecond
	var mu sync.Mutex
	var states []string
	w := breaker.Wrap(redislock.New(rdb), breaker.WithFailures(3), breaker.WithOpenTimeout(openTimeout), breaker.WithWatchTimeout(100*time.Millisecond),
		breaker.OnStateChange(func(_, _, to string) { mu.Lock(); states = append(states, to); mu.Unlock() }))
	br, _ := breaker.Of(w)
	c := lockx.New(w, lockx.WithWatchdog(time.Second))

	type sample struct {
		at   time.Time
		dur  time.Duration
		err  error
		open bool // breaker open when the call started
	}
	var smu sync.Mutex
	var samples []sample
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				open := br.State() == "open"
				start := time.Now()
				actx, cancel := context.WithTimeout(ctx, 3*time.Second)
				l, err := c.Acquire(actx, fmt.Sprintf("outage/%d/%d", g, i%8))
				cancel()
				d := time.Since(start)
				if err == nil {
					_ = l.Release(context.Background())
				}
				smu.Lock()
				samples = append(samples, sample{start, d, err, open})
				smu.Unlock()
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	srv.Stop()
	stopped := time.Now()
	deadline := time.Now().Add(5 * time.Second)
	for br.State() != "open" && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if br.State() != "open" {
		t.Fatalf("breaker %s %v after Redis stopped", br.State(), time.Since(stopped))
	}
	opened := time.Now()
	time.Sleep(time.Second)
	// A call that began while the breaker was open may become its half-open
	// probe; if Redis is already back (Restart waits for it to answer), the
	// probe succeeds. Only calls that ended before the restart began saw the
	// outage throughout.
	restarting := time.Now()
	srv.Restart(t)
	restarted := time.Now()
	var recovered time.Time
	for time.Since(restarted) < 5*time.Second {
		smu.Lock()
		for _, s := range samples {
			if s.at.After(restarted) && s.err == nil {
				recovered = s.at
				break
			}
		}
		smu.Unlock()
		if !recovered.IsZero() {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	wg.Wait()
	if err := c.Close(); err != nil {
		t.Log(err)
	}

	if recovered.IsZero() {
		t.Fatal("no successful acquire within 5 s of the restart")
	}
	// Recovery: the breaker half-opens within openTimeout; allow for Redis
	// to come up and for the client to redial.
	if d := recovered.Sub(restarted); d > openTimeout+time.Second {
		t.Errorf("recovered %v after the restart, want within the open timeout (%v) plus a redial", d, openTimeout)
	}
	var fast []time.Duration
	for _, s := range samples {
		if s.open && s.at.After(opened) && s.at.Add(s.dur).Before(restarting) {
			if !errors.Is(s.err, lockx.ErrUnavailable) {
				t.Fatalf("acquire with the breaker open: %v, want ErrUnavailable", s.err)
			}
			fast = append(fast, s.dur)
		}
	}
	if len(fast) < 10 {
		t.Fatalf("only %d acquires while open", len(fast))
	}
	slices.Sort(fast)
	p99 := fast[len(fast)*99/100]
	t.Logf("breaker open: %d acquires, p50 %v, p99 %v, max %v; recovered %v after restart; states %v",
		len(fast), fast[len(fast)/2], p99, fast[len(fast)-1], recovered.Sub(restarted), states)
	if p99 > 50*time.Millisecond {
		t.Errorf("p99 of acquires with the breaker open = %v, want ≤ 50 ms", p99)
	}
}

// halves is a BatchExtender whose renewals fall into two groups.
type halves struct{ *memlock.Backend }

func (halves) ExtendMany(_ context.Context, reqs []driver.ExtendRequest) []error {
	return make([]error, len(reqs))
}

func (halves) PartitionExtends(_ context.Context, reqs []driver.ExtendRequest) [][]int {
	return [][]int{{0}, {1}}
}

// batchOnly is a BatchExtender without a partition: its PartitionExtends,
// of another signature, hides the one of halves.
type batchOnly struct{ halves }

func (batchOnly) PartitionExtends() {}

func TestPartitionForwarded(t *testing.T) {
	reqs := make([]driver.ExtendRequest, 2)
	var p driver.ExtendPartitioner
	ok := driver.As(breaker.Wrap(halves{memlock.New()}), &p)
	if !ok {
		t.Fatal("Wrap of a BatchExtender is no ExtendPartitioner")
	}
	if got := p.PartitionExtends(context.Background(), reqs); !reflect.DeepEqual(got, [][]int{{0}, {1}}) {
		t.Errorf("partition through the breaker = %v, want the wrapped backend's", got)
	}
	if driver.As(breaker.Wrap(batchOnly{halves{memlock.New()}}), &p) {
		t.Error("Wrap of a BatchExtender without a partition is an ExtendPartitioner")
	}
}

// TestOpenBreakerGatesEveryCapability: once the breaker is open, a call
// through any capability's adapter is refused without reaching the backend.
// memlock would have answered each of them.
func TestOpenBreakerGatesEveryCapability(t *testing.T) {
	ctx := context.Background()
	f := &failing{Backend: memlock.New()}
	w := breaker.Wrap(f, breaker.WithFailures(1), breaker.WithOpenTimeout(time.Hour))
	f.down.Store(true)
	if _, err := w.Acquire(ctx, driver.Request{Key: "k", Owner: lockx.NewOwner(), Lease: time.Second}); err == nil {
		t.Fatal("the failing backend did not fail")
	}
	f.down.Store(false)
	owner := lockx.NewOwner()
	req := driver.Request{Key: "k", Owner: owner, Lease: time.Second}
	calls := map[string]func() error{
		"Notifier": func() error {
			var n driver.Notifier
			driver.As(w, &n)
			_, _, err := n.Watch(ctx, "k", owner)
			return err
		},
		"BatchExtender": func() error {
			var x driver.BatchExtender
			driver.As(w, &x)
			return x.ExtendMany(ctx, []driver.ExtendRequest{{Key: "k", Owner: owner, Lease: time.Second}})[0]
		},
		"Passer": func() error {
			var p driver.Passer
			driver.As(w, &p)
			_, err := p.Pass(ctx, "k", owner, lockx.NewOwner(), time.Second)
			return err
		},
		"ManyAcquirer": func() error {
			var m driver.ManyAcquirer
			driver.As(w, &m)
			_, err := m.AcquireMany(ctx, []driver.Request{req})
			return err
		},
		"ManyReleaser": func() error {
			var m driver.ManyReleaser
			driver.As(w, &m)
			return m.ReleaseMany(ctx, []string{"k"}, owner)[0]
		},
		"FenceStore": func() error {
			var fs driver.FenceStore
			driver.As(w, &fs)
			return fs.Fence(ctx, "k", 1)
		},
		"RWBackend": func() error {
			var rb driver.RWBackend
			driver.As(w, &rb)
			_, err := rb.AcquireRW(ctx, driver.ModeRead, req)
			return err
		},
		"SemaphoreBackend": func() error {
			var sb driver.SemaphoreBackend
			driver.As(w, &sb)
			_, err := sb.Permits(ctx, "k")
			return err
		},
		"ResultStore": func() error {
			var rs driver.ResultStore
			driver.As(w, &rs)
			_, err := rs.LoadResult(ctx, "k")
			return err
		},
		"Inspector": func() error {
			var in driver.Inspector
			driver.As(w, &in)
			_, err := in.Lock(ctx, "k")
			return err
		},
		"StockBackend": func() error {
			var sb driver.StockBackend
			driver.As(w, &sb)
			_, _, err := sb.InitStock(ctx, "sku", []int64{1})
			return err
		},
		"Clock": func() error {
			var c driver.Clock
			driver.As(w, &c)
			_, err := c.Now(ctx)
			return err
		},
	}
	// The registrations that do not reach the store: a partition reads
	// routing state, a loss callback is local. They are not gated.
	ungated := map[string]bool{"ExtendPartitioner": true, "LossNotifier": true}
	for _, c := range captest.Capabilities {
		if !c.Has(w) {
			continue
		}
		call, ok := calls[c.Name]
		if !ok {
			if !ungated[c.Name] {
				t.Errorf("driver.%s: no gated call in this test; add one", c.Name)
			}
			continue
		}
		if err := call(); !errors.Is(err, breaker.ErrCircuitOpen) || !errors.Is(err, driver.ErrNoRetry) {
			t.Errorf("driver.%s through an open breaker: %v, want ErrCircuitOpen and ErrNoRetry", c.Name, err)
		}
	}
}
