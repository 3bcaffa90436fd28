package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/lockx/zklock"
	"github.com/lockx-go/lockx/patterns/rwlock"
	"github.com/lockx-go/lockx/patterns/semaphore"
)

// The pattern tables (issue 5): the read-mostly workload with a read/write
// lock against a plain lock, and a semaphore of N = 8 against a plain lock,
// on every backend.
const (
	rwSection      = "rwlock"
	semSection     = "semaphore"
	patGoroutines  = 64
	rwQuery        = time.Millisecond // the simulated query under the lock
	rwWritePercent = 5
	semPermits     = 8
	// pgPatternConns is the pool of the PostgreSQL rows: a pattern decision
	// holds a pool connection for its transaction, and pglock keeps up to 4
	// holder sessions and a listener for plain locks.
	pgPatternConns = 24

	namePatLock     = "plain lock: Acquire (defaults)"
	namePatLockFair = "plain lock: Acquire Fair()"
	nameRW          = "rwlock: RLock (95 %) / Lock (5 %)"
	nameSem         = "semaphore N = 8: Acquire (fair, the default)"
	nameSemNonFair  = "semaphore N = 8: Acquire, NonFair()"
)

// patBackend opens one lockx backend for a pattern row; done releases what
// it opened.
type patBackend struct {
	name string
	open func(ctx context.Context, e *Env) (b driver.Backend, done func(), err error)
}

func patBackends() []patBackend {
	return []patBackend{
		{"memlock", func(context.Context, *Env) (driver.Backend, func(), error) {
			return memlock.New(), func() {}, nil
		}},
		{"Redis", func(ctx context.Context, e *Env) (driver.Backend, func(), error) {
			b, rdb, err := openRedisBackend(ctx, e, PoolSize)
			if err != nil {
				return nil, nil, err
			}
			return b, func() { rdb.Close() }, nil
		}},
		{"PostgreSQL", func(ctx context.Context, e *Env) (driver.Backend, func(), error) {
			pool, err := e.PG(ctx, pgPatternConns)
			if err != nil {
				return nil, nil, err
			}
			b, err := newPGBackend(pool)
			if err != nil {
				pool.Close()
				return nil, nil, err
			}
			return b, pool.Close, nil
		}},
		{"ZooKeeper", func(ctx context.Context, e *Env) (driver.Backend, func(), error) {
			addr, err := e.ZooKeeper(ctx)
			if err != nil {
				return nil, nil, err
			}
			b, err := zklock.Dial(ctx, []string{addr}, zklock.WithRoot("/lockxbench"))
			if err != nil {
				return nil, nil, err
			}
			return b, func() { _ = b.Close() }, nil
		}},
	}
}

// patGroup names a pattern table's group: one backend, 64 goroutines.
func patGroup(backend string) string {
	return fmt.Sprintf("%s, %d goroutines, one key", backend, patGoroutines)
}

func patternCases() []*Case {
	var cs []*Case
	for _, be := range patBackends() {
		group := patGroup(be.name)
		run := func(body func(ctx context.Context, p Params, c *lockx.Client) Sample) func(ctx context.Context, e *Env, p Params) (Sample, error) {
			return func(ctx context.Context, e *Env, p Params) (Sample, error) {
				b, done, err := be.open(ctx, e)
				if err != nil {
					return nil, err
				}
				defer done()
				c := lockx.New(b)
				defer c.Close()
				return body(ctx, p, c), nil
			}
		}
		cs = append(cs,
			&Case{Section: rwSection, Group: group, Name: namePatLock, Baseline: true,
				Run: run(func(ctx context.Context, p Params, c *lockx.Client) Sample { return runReadMostly(ctx, p, c, nil) })},
			&Case{Section: rwSection, Group: group, Name: nameRW,
				Run: run(func(ctx context.Context, p Params, c *lockx.Client) Sample {
					return runReadMostly(ctx, p, c, rwlock.New(c))
				})},
			&Case{Section: semSection, Group: group, Name: namePatLock, Baseline: true,
				Run: run(func(ctx context.Context, p Params, c *lockx.Client) Sample { return runPermits(ctx, p, c, nil) })},
			&Case{Section: semSection, Group: group, Name: namePatLockFair,
				Run: run(func(ctx context.Context, p Params, c *lockx.Client) Sample {
					return runPermits(ctx, p, c, nil, lockx.Fair())
				})},
			&Case{Section: semSection, Group: group, Name: nameSem,
				Run: run(func(ctx context.Context, p Params, c *lockx.Client) Sample {
					return runPermits(ctx, p, c, semaphore.New(c, "sem", semPermits))
				})},
			&Case{Section: semSection, Group: group, Name: nameSemNonFair,
				Run: run(func(ctx context.Context, p Params, c *lockx.Client) Sample {
					return runPermits(ctx, p, c, semaphore.New(c, "sem", semPermits, semaphore.NonFair()))
				})},
		)
	}
	return cs
}

// runReadMostly is the read-mostly workload: 64 goroutines on one key, each
// operation a read (95 %) or a write (5 %) holding the lock for a simulated
// 1 ms query. With rw nil every operation takes the plain lock; otherwise a
// read takes RLock and a write Lock. The rate counts operations; the latency
// is the wait for the grant. "overlaps" counts grants of a write while
// another operation was inside, or of any operation while a write was
// (must be 0).
func runReadMostly(ctx context.Context, p Params, c *lockx.Client, rw *rwlock.RW) Sample {
	const key = "rw"
	var inside, writing atomic.Int64
	var overlaps, writes atomic.Int64
	s := drive(ctx, p, patGoroutines, func(ctx context.Context, w int, r *recorder) {
		write := rand.IntN(100) < rwWritePercent
		t0 := time.Now()
		var g *lockx.Lock
		var err error
		switch {
		case rw == nil:
			g, err = c.Acquire(ctx, key)
		case write:
			g, err = rw.Lock(ctx, key)
		default:
			g, err = rw.RLock(ctx, key)
		}
		if err != nil {
			if ctx.Err() == nil {
				r.fail()
			}
			return
		}
		wait := time.Since(t0)
		exclusive := write || rw == nil
		// A writer marks itself before it counts the others in, a reader
		// counts itself in before it looks for a writer: whichever comes
		// second sees the other.
		if exclusive && writing.Add(1) > 1 {
			overlaps.Add(1)
		}
		if n := inside.Add(1); exclusive && n > 1 || !exclusive && writing.Load() > 0 {
			overlaps.Add(1)
		}
		time.Sleep(rwQuery)
		inside.Add(-1)
		if exclusive {
			writing.Add(-1)
		}
		if err := g.Release(context.WithoutCancel(ctx)); err != nil {
			r.fail()
			return
		}
		if write && r.open.Load() {
			writes.Add(1)
		}
		r.ok(wait)
	})
	s[mViol] = float64(overlaps.Load())
	s["writes"] = float64(writes.Load())
	return s
}

// runPermits is the semaphore workload: 64 goroutines take one permit of an
// N = 8 semaphore (or, with sem nil, the plain lock with opts) and give it
// back at once. The rate is the handoff rate: grants per second to another
// goroutine than the one granted last, as in the hot-key tables (a barging
// lock often goes straight back to the goroutine that just released it,
// which hands nothing off); "grants/s" counts every grant. The wait is the
// handed-to goroutine's, from its call to the grant. The holders are counted three ways: the exact peak of the goroutines between
// grant and release, a sample of that count every 100 µs, and the permits
// in use as the backend reports them (Semaphore.Usage) every 5 ms;
// "overlaps" counts grants and samples above the limit (must be 0), "peak
// in use" is the backend's highest figure.
func runPermits(ctx context.Context, p Params, c *lockx.Client, sem *semaphore.Semaphore, opts ...lockx.Option) Sample {
	const key = "sem"
	limit := int64(1)
	if sem != nil {
		limit = sem.Limit()
	}
	var holders, peak, over, samples, last, grants atomic.Int64
	last.Store(-1)
	var inUse int64
	sctx, stop := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(100 * time.Microsecond)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
			samples.Add(1)
			if holders.Load() > limit {
				over.Add(1)
			}
			if sem != nil && i%50 == 0 {
				if u, err := sem.Usage(sctx); err == nil {
					if inUse = max(inUse, u.InUse); u.InUse > limit {
						over.Add(1)
					}
				}
			}
		}
	}()
	s := drive(ctx, p, patGoroutines, func(ctx context.Context, w int, r *recorder) {
		t0 := time.Now()
		var release func(context.Context) error
		if sem == nil {
			l, err := c.Acquire(ctx, key, opts...)
			if err != nil {
				if ctx.Err() == nil {
					r.fail()
				}
				return
			}
			release = l.Release
		} else {
			pm, err := sem.Acquire(ctx)
			if err != nil {
				if ctx.Err() == nil {
					r.fail()
				}
				return
			}
			release = pm.Release
		}
		wait := time.Since(t0)
		n := holders.Add(1)
		for m := peak.Load(); n > m && !peak.CompareAndSwap(m, n); m = peak.Load() {
		}
		if n > limit {
			over.Add(1)
		}
		if r.open.Load() {
			grants.Add(1)
		}
		handoff := last.Swap(int64(w)) != int64(w)
		holders.Add(-1)
		if err := release(context.WithoutCancel(ctx)); err != nil {
			r.fail()
			return
		}
		if handoff {
			r.ok(wait)
		}
	})
	stop()
	<-sampled
	s["peak holders"] = float64(peak.Load())
	if sem != nil {
		s["peak in use"] = float64(inUse)
	}
	s["samples"] = float64(samples.Load())
	s["grants/s"] = float64(grants.Load()) / p.Duration.Seconds()
	s[mViol] = float64(over.Load())
	return s
}

// The tables of the pattern rows (listed in sections, report.go).
var (
	rwTable = section{
		key:   rwSection,
		title: "Read-mostly workload: read/write lock against a plain lock, 64 goroutines, one key",
		intro: fmt.Sprintf("One lockx Client per backend (Redis pool %d, PostgreSQL pool %d) shared by %d goroutines on one key; each operation is a read (%d %%) or a write (%d %%) that holds the lock for a simulated %v query (a sleep). The plain-lock row takes the lock for every operation; the rwlock row takes RLock for a read and Lock for a write (writer preference, the default). Wait is from the call to the grant. Overlaps counts a write beside any other operation (must be 0).", PoolSize, pgPatternConns, patGoroutines, 100-rwWritePercent, rwWritePercent, rwQuery),
		cols: []col{colRate("operations/s"), {mP50, "wait p50 ms", false}, {mP99, "wait p99 ms", true},
			{"writes", "writes", false}, colFail, colViol},
		ratio: mRate, ratioHeader: "× plain lock (per run)",
	}
	semTable = section{
		key:   semSection,
		title: "Semaphore with N = 8 against a plain lock, 64 goroutines, one key",
		intro: fmt.Sprintf("One lockx Client per backend shared by %d goroutines; each takes a permit (or the lock) and gives it back at once. Handoffs/s counts grants to another goroutine than the one granted last, as in the hot-key tables (a barging plain lock often goes straight back to the goroutine that just released it, which hands nothing off); grants/s counts every grant. Wait is the handed-to goroutine's, from its call to the grant. Peak holders is the exact maximum of goroutines between grant and release; peak in use the highest permits-in-use the backend reported (Semaphore.Usage every 5 ms); overlaps counts grants, 100 µs samples and usage readings above the limit (must be 0).", patGoroutines),
		cols: []col{colRate("handoffs/s"), {"grants/s", "grants/s", false}, {mP50, "wait p50 ms", false}, {mP99, "wait p99 ms", true},
			{"peak holders", "peak holders", false}, {"peak in use", "peak in use (backend)", false}, colFail, colViol},
		ratio: mRate, ratioHeader: "× plain lock (per run)",
	}
)

// patternTargets checks issue 5's numbers on every backend: the read-mostly
// rwlock at ≥ 3× the plain lock, and the N = 8 semaphore at ≥ 0.8× the
// plain lock's handoff rate with never more than 8 holders.
func patternTargets(rs Results) []target {
	var out []target
	for _, be := range patBackends() {
		g := patGroup(be.name)
		rwLock, rw := rs.find(rwSection, g, namePatLock), rs.find(rwSection, g, nameRW)
		out = append(out, ratioTarget("5", fmt.Sprintf("%s, read-mostly (95 %% reads, 64 goroutines, one key): rwlock ≥ 3× the plain lock's operations/s", be.name),
			rw, rwLock, mRate, 3, func(float64) string {
				return fmt.Sprintf("rwlock wait p50 %s ms, p99 %s ms; plain lock p50 %s ms", num(med(rw, mP50)), num(med(rw, mP99)), num(med(rwLock, mP50)))
			}))
		semLock, sem := rs.find(semSection, g, namePatLock), rs.find(semSection, g, nameSem)
		t := ratioTarget("5", fmt.Sprintf("%s, semaphore N = 8 under 64 goroutines: ≥ 0.8× the plain lock's handoff rate, ≤ 8 holders at every sampled moment", be.name),
			sem, semLock, mRate, 0.8, func(float64) string {
				return fmt.Sprintf("semaphore wait p50 %s ms; NonFair() %s handoffs/s", num(med(sem, mP50)), num(med(rs.find(semSection, g, nameSemNonFair), mRate)))
			})
		if t.status != statusNA {
			fair := rs.find(semSection, g, namePatLockFair)
			over, peak := med(sem, mViol), med(sem, "peak in use")
			t.detail += fmt.Sprintf("; counting every grant, not only handoffs: %s× the plain lock (%s vs %s grants/s); %s× the plain lock with Fair() (every grant a handoff, %s handoffs/s)",
				num(median(ratios(sem, semLock, "grants/s"))), num(med(sem, "grants/s")), num(med(semLock, "grants/s")),
				num(median(ratios(sem, fair, mRate))), num(med(fair, mRate)))
			t.detail += fmt.Sprintf("; peak %s permits in use (backend), %s holders, %s readings above 8", num(peak), num(med(sem, "peak holders")), num(over))
			if over > 0 || peak > semPermits {
				t.status = missed(num(peak)+" permits in use", "more than 8 holders seen")
			}
		}
		out = append(out, t)
	}
	return out
}
