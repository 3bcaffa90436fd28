package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/patterns/idempotency"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func newGuard(t testing.TB, opts ...idempotency.Option) (*idempotency.Guard, *memlock.Backend) {
	t.Helper()
	b := memlock.New()
	locks := lockx.New(b)
	t.Cleanup(func() { locks.Close() })
	g, err := idempotency.New(locks, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return g, b
}

// counted returns fn that counts its runs, sleeps d and returns v.
func counted(n *atomic.Int64, d time.Duration, v string) func(context.Context) ([]byte, error) {
	return func(ctx context.Context) ([]byte, error) {
		n.Add(1)
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		return []byte(v), nil
	}
}

// guardsOver returns n guards sharing one lock backend and one result store:
// n service instances.
type guardMaker func(t *testing.T, n int, opts ...idempotency.Option) []*idempotency.Guard

func memGuards(t *testing.T, n int, opts ...idempotency.Option) []*idempotency.Guard {
	b := memlock.New()
	gs := make([]*idempotency.Guard, n)
	for i := range gs {
		locks := lockx.New(b)
		t.Cleanup(func() { locks.Close() })
		g, err := idempotency.New(locks, opts...)
		if err != nil {
			t.Fatal(err)
		}
		gs[i] = g
	}
	return gs
}

// testConcurrentOnce sends 100 concurrent calls with one key, spread over the
// instances: fn runs once; without a wait the others are in progress or
// replayed, with a wait every call returns the one outcome.
func testConcurrentOnce(t *testing.T, mk guardMaker) {
	for _, wait := range []time.Duration{0, 10 * time.Second} {
		t.Run(fmt.Sprintf("wait=%v", wait), func(t *testing.T) {
			gs := mk(t, 3, idempotency.WithWait(wait))
			key := "order:" + t.Name()
			var runs atomic.Int64
			var fresh, replays, busy atomic.Int64
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range 100 {
				wg.Go(func() {
					<-start
					v, replayed, err := gs[i%len(gs)].Run(context.Background(), key, []byte("fp"), counted(&runs, 100*time.Millisecond, "done"))
					switch {
					case errors.Is(err, lockx.ErrInProgress):
						busy.Add(1)
					case err != nil:
						t.Error(err)
					case string(v) != "done":
						t.Errorf("value %q, want done", v)
					case replayed:
						replays.Add(1)
					default:
						fresh.Add(1)
					}
				})
			}
			close(start)
			wg.Wait()
			if runs.Load() != 1 || fresh.Load() != 1 {
				t.Fatalf("fn ran %d times, %d fresh results; want 1 and 1", runs.Load(), fresh.Load())
			}
			if wait > 0 && replays.Load() != 99 {
				t.Fatalf("with a wait: %d replays, %d in progress; want 99 replays", replays.Load(), busy.Load())
			}
			if replays.Load()+busy.Load() != 99 {
				t.Fatalf("%d replays + %d in progress, want 99", replays.Load(), busy.Load())
			}
			t.Logf("1 run, %d replays, %d in progress", replays.Load(), busy.Load())
		})
	}
}

func TestConcurrentOnce(t *testing.T) { testConcurrentOnce(t, memGuards) }

type receipt struct {
	ID     string
	Amount int
}

func TestTypedReplay(t *testing.T) {
	g, _ := newGuard(t)
	ctx := context.Background()
	runs := 0
	charge := func(context.Context) (receipt, error) {
		runs++
		return receipt{ID: fmt.Sprint("r", runs), Amount: 42}, nil
	}
	r1, err := lockx.IdempotentWith(ctx, g, "charge:1", charge)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := lockx.IdempotentWith(ctx, g, "charge:1", charge)
	if err != nil {
		t.Fatal(err)
	}
	if runs != 1 || r1 != r2 || r1.ID != "r1" {
		t.Fatalf("runs=%d r1=%+v r2=%+v; want one run and equal receipts", runs, r1, r2)
	}
}

func TestDefault(t *testing.T) {
	ctx := context.Background()
	fn := func(context.Context) (int, error) { return 7, nil }
	lockx.SetDefaultIdempotency(nil)
	if _, err := lockx.Idempotent(ctx, "k", fn); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Fatalf("without a default: %v, want ErrInvalidArgument", err)
	}
	g, _ := newGuard(t)
	lockx.SetDefaultIdempotency(g)
	defer lockx.SetDefaultIdempotency(nil)
	if lockx.DefaultIdempotency() != g {
		t.Fatal("DefaultIdempotency is not the guard set")
	}
	if v, err := lockx.Idempotent(ctx, "k", fn); v != 7 || err != nil {
		t.Fatalf("Idempotent = %v, %v", v, err)
	}
}

var errDeclined = errors.New("card declined")

func TestTerminalErrorReplayed(t *testing.T) {
	g, _ := newGuard(t, idempotency.WithErrors(errDeclined))
	other, _ := newGuard(t) // knows no sentinel
	ctx := context.Background()
	runs := 0
	fn := func(context.Context) ([]byte, error) {
		runs++
		return nil, fmt.Errorf("charge: %w", errDeclined)
	}
	if _, _, err := g.Run(ctx, "pay:1", nil, fn); !errors.Is(err, errDeclined) {
		t.Fatalf("first call: %v", err)
	}
	_, replayed, err := g.Run(ctx, "pay:1", nil, fn)
	var se *lockx.StoredError
	if !replayed || !errors.As(err, &se) || !errors.Is(err, errDeclined) || se.Message != "charge: card declined" {
		t.Fatalf("replay: replayed=%v err=%v; want a StoredError matching errDeclined", replayed, err)
	}
	if runs != 1 {
		t.Fatalf("fn ran %d times, want 1", runs)
	}
	// Typed callers get the stored error too.
	_, err = lockx.IdempotentWith(ctx, g, "pay:1", func(context.Context) (int, error) { return 1, nil })
	if !errors.Is(err, errDeclined) {
		t.Fatalf("typed replay: %v", err)
	}
	// Stored outcomes in another guard's store are separate.
	if _, _, err := other.Run(ctx, "pay:1", nil, fn); errors.As(err, &se) {
		t.Fatalf("a guard over another store replayed: %v", err)
	}
}

func TestRetryableNotStored(t *testing.T) {
	errTimeout := errors.New("upstream timeout")
	g, _ := newGuard(t, idempotency.WithRetryable(func(err error) bool { return errors.Is(err, errTimeout) }))
	ctx := context.Background()
	var runs atomic.Int64
	fail := func(err error) func(context.Context) ([]byte, error) {
		return func(context.Context) ([]byte, error) { runs.Add(1); return nil, err }
	}
	for _, err := range []error{errTimeout, idempotency.Retry(errors.New("marked")), nil} {
		fn := fail(err)
		if err == nil {
			fn = counted(&runs, 0, "ok")
		}
		v, replayed, got := g.Run(ctx, "job", nil, fn)
		if !errors.Is(got, err) || replayed || (err == nil && string(v) != "ok") {
			t.Fatalf("Run = %q, %v, %v; want fn's own outcome %v", v, replayed, got, err)
		}
	}
	if _, replayed, _ := g.Run(ctx, "job", nil, fail(errTimeout)); !replayed || runs.Load() != 3 {
		t.Fatalf("after success: replayed=%v runs=%d; want a replay after 3 runs", replayed, runs.Load())
	}
}

func TestDefaultRetryable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{context.Canceled, true},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), true},
		{lockx.ErrLost, true},
		{driver.Unavailable("get", errors.New("conn refused")), true},
		{idempotency.Retry(errDeclined), true},
		{errDeclined, false},
		{errors.New("validation failed"), false},
	} {
		if got := idempotency.Retryable(tc.err); got != tc.want {
			t.Errorf("Retryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if idempotency.Retry(nil) != nil {
		t.Error("Retry(nil) != nil")
	}
}

func TestRetention(t *testing.T) {
	g, _ := newGuard(t, idempotency.WithRetention(100*time.Millisecond))
	ctx := context.Background()
	var runs atomic.Int64
	for range 2 {
		if _, _, err := g.Run(ctx, "k", nil, counted(&runs, 0, "v")); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(250 * time.Millisecond)
	_, replayed, err := g.Run(ctx, "k", nil, counted(&runs, 0, "v"))
	if err != nil || replayed || runs.Load() != 2 {
		t.Fatalf("after retention: replayed=%v err=%v runs=%d; want a fresh second run", replayed, err, runs.Load())
	}
}

func TestFingerprint(t *testing.T) {
	g, _ := newGuard(t)
	ctx := context.Background()
	var runs atomic.Int64
	if _, _, err := g.Run(ctx, "k", []byte("a"), counted(&runs, 0, "v")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := g.Run(ctx, "k", []byte("b"), counted(&runs, 0, "v")); !errors.Is(err, lockx.ErrKeyReused) {
		t.Fatalf("other fingerprint: %v, want ErrKeyReused", err)
	}
	if _, replayed, err := g.Run(ctx, "k", nil, counted(&runs, 0, "v")); err != nil || !replayed {
		t.Fatalf("no fingerprint: replayed=%v err=%v; want a replay", replayed, err)
	}
	if runs.Load() != 1 {
		t.Fatalf("fn ran %d times", runs.Load())
	}
}

// TestCrashedHolder: a process that died inside fn leaves the key's lock
// held until its lease ends; calls until then are in progress, the first
// call after it runs fn.
func TestCrashedHolder(t *testing.T) {
	g, b := newGuard(t)
	ctx := context.Background()
	_, err := b.Acquire(ctx, driver.Request{Key: idempotency.DefaultPrefix + "k", Owner: lockx.NewOwner(), Lease: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int64
	if _, _, err := g.Run(ctx, "k", nil, counted(&runs, 0, "v")); !errors.Is(err, lockx.ErrInProgress) {
		t.Fatalf("while the dead holder's lease runs: %v, want ErrInProgress", err)
	}
	time.Sleep(300 * time.Millisecond)
	if v, replayed, err := g.Run(ctx, "k", nil, counted(&runs, 0, "v")); err != nil || replayed || string(v) != "v" {
		t.Fatalf("after the lease: %q %v %v; want a fresh run", v, replayed, err)
	}
}

func TestPanicStoresNothing(t *testing.T) {
	g, _ := newGuard(t)
	ctx := context.Background()
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("panic did not propagate")
			}
		}()
		g.Run(ctx, "k", nil, func(context.Context) ([]byte, error) { panic("boom") })
	}()
	var runs atomic.Int64
	if _, replayed, err := g.Run(ctx, "k", nil, counted(&runs, 0, "v")); err != nil || replayed || runs.Load() != 1 {
		t.Fatalf("after a panic: replayed=%v err=%v runs=%d; want a fresh run", replayed, err, runs.Load())
	}
}

func TestNestedSameKeyInProgress(t *testing.T) {
	g, _ := newGuard(t)
	ctx := context.Background()
	var inner error
	_, _, err := g.Run(ctx, "k", nil, func(ctx context.Context) ([]byte, error) {
		_, _, inner = g.Run(ctx, "k", nil, func(context.Context) ([]byte, error) { return nil, nil })
		return []byte("outer"), nil
	})
	if err != nil || !errors.Is(inner, lockx.ErrInProgress) {
		t.Fatalf("outer %v, inner %v; want nil and ErrInProgress", err, inner)
	}
}

func TestCancelledWhileWaiting(t *testing.T) {
	g, _ := newGuard(t, idempotency.WithWait(10*time.Second))
	release := make(chan struct{})
	started := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		g.Run(context.Background(), "k", nil, func(context.Context) ([]byte, error) {
			close(started)
			<-release
			return nil, nil
		})
	})
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, _, err := g.Run(ctx, "k", nil, func(context.Context) ([]byte, error) { return nil, nil })
	close(release)
	wg.Wait()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting call with an ended context: %v", err)
	}
}

// flakyStore fails on demand.
type flakyStore struct {
	driver.ResultStore
	loadErr, saveErr error
}

func (s *flakyStore) LoadResult(ctx context.Context, key string) (driver.Outcome, error) {
	if s.loadErr != nil {
		return driver.Outcome{}, s.loadErr
	}
	return s.ResultStore.LoadResult(ctx, key)
}

func (s *flakyStore) SaveResult(ctx context.Context, key string, o driver.Outcome, d time.Duration) (driver.Outcome, bool, error) {
	if s.saveErr != nil {
		return driver.Outcome{}, false, s.saveErr
	}
	return s.ResultStore.SaveResult(ctx, key, o, d)
}

func TestStoreFailure(t *testing.T) {
	down := driver.Unavailable("get", errors.New("connection refused"))
	store := &flakyStore{ResultStore: memlock.NewResultStore(), loadErr: down}
	g, _ := newGuard(t, idempotency.WithStore(store))
	ctx := context.Background()
	var runs atomic.Int64
	if _, _, err := g.Run(ctx, "k", nil, counted(&runs, 0, "v")); !errors.Is(err, lockx.ErrUnavailable) || runs.Load() != 0 {
		t.Fatalf("store down: %v, runs=%d; want ErrUnavailable and no run (fail closed)", err, runs.Load())
	}
	store.loadErr, store.saveErr = nil, down
	v, _, err := g.Run(ctx, "k", nil, counted(&runs, 0, "v"))
	if !errors.Is(err, lockx.ErrUnavailable) || string(v) != "v" {
		t.Fatalf("save failed: %q %v; want fn's value and ErrUnavailable", v, err)
	}
}

func TestNewAndArguments(t *testing.T) {
	if _, err := idempotency.New(nil); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Errorf("New(nil): %v", err)
	}
	locks := lockx.New(noResults{memlock.New()})
	defer locks.Close()
	if _, err := idempotency.New(locks); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Errorf("New over a backend without results: %v", err)
	}
	for _, o := range []idempotency.Option{
		idempotency.WithRetention(0), idempotency.WithWait(-1), idempotency.WithRetryable(nil),
		idempotency.WithStore(nil), idempotency.WithErrors(nil),
	} {
		if _, err := idempotency.New(locks, o); !errors.Is(err, lockx.ErrInvalidArgument) {
			t.Errorf("bad option: %v", err)
		}
	}
	g, _ := newGuard(t)
	ctx := context.Background()
	if _, _, err := g.Run(ctx, "", nil, counted(new(atomic.Int64), 0, "")); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Errorf("empty key: %v", err)
	}
	if _, _, err := g.Run(ctx, "k", nil, nil); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Errorf("nil fn: %v", err)
	}
	if _, err := lockx.IdempotentWith[int](ctx, nil, "k", nil); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Errorf("nil idempotency: %v", err)
	}
}

type noResults struct{ driver.Backend }

func TestForget(t *testing.T) {
	g, _ := newGuard(t)
	ctx := context.Background()
	var runs atomic.Int64
	g.Run(ctx, "k", nil, counted(&runs, 0, "v"))
	if err := g.Forget(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if _, replayed, _ := g.Run(ctx, "k", nil, counted(&runs, 0, "v")); replayed || runs.Load() != 2 {
		t.Fatalf("after Forget: replayed=%v runs=%d", replayed, runs.Load())
	}
}

func TestScope(t *testing.T) {
	if idempotency.Scope("ab", "c") == idempotency.Scope("a", "bc") ||
		idempotency.Scope("a:1", "x") == idempotency.Scope("a", "1:x") {
		t.Fatal("scoped keys of different principals collide")
	}
}

// TestRunDoubleGrantFirstOutcomeWins: without a transaction, a lock granted
// twice lets the work run twice — the reason for RunTx — but every caller
// still gets the one outcome stored first.
func TestRunDoubleGrantFirstOutcomeWins(t *testing.T) {
	store := memlock.NewResultStore()
	var guards []*idempotency.Guard
	for range 2 {
		locks := lockx.New(memlock.New())
		t.Cleanup(func() { locks.Close() })
		g, _ := idempotency.New(locks, idempotency.WithStore(store))
		guards = append(guards, g)
	}
	var n atomic.Int64
	got := make([]string, 2)
	var wg sync.WaitGroup
	for i, g := range guards {
		wg.Go(func() {
			v, _, err := g.Run(context.Background(), "k", nil, func(context.Context) ([]byte, error) {
				time.Sleep(50 * time.Millisecond)
				return []byte{byte('a' + n.Add(1))}, nil
			})
			if err != nil {
				t.Error(err)
			}
			got[i] = string(v)
		})
	}
	wg.Wait()
	if n.Load() != 2 || got[0] != got[1] {
		t.Fatalf("runs=%d results %q; want 2 runs and one outcome for both", n.Load(), got)
	}
}
