package bench

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
)

// Names of the rows shared by several tables and by the targets.
const (
	nameRaw         = "raw go-redis SET NX + Lua compare-and-delete"
	nameBsm         = "bsm/redislock Obtain + Release (defaults)"
	nameRedsync     = "redsync Lock + Unlock, 1 pool (defaults)"
	nameRedsync5    = "redsync, 5 pools on 5 servers (defaults)"
	nameLockx       = "lockx Acquire + Release (redislock)"
	nameLockxTry    = "lockx TryAcquire + Release (redislock)"
	nameLockxMem    = "lockx Acquire + Release (memlock, in-process)"
	nameFencedFloor = "floor of a fenced lock: raw go-redis, a token script (GET, SET) + a compare-and-tombstone script"
	scalingSection  = "uncontended"
)

// pairLib is one row of the uncontended table.
type pairLib struct {
	name   string
	open   opener
	remote bool // talks to the main Redis server (commands are counted)
	every  bool // measured at every goroutine count, not only 1, 16, 64
	quick  bool
}

// pairLibs are the uncontended rows: every library with its defaults,
// lockx with the watchdog off (WithLease) as the issue asks.
func pairLibs() []pairLib {
	lease := lockx.WithLease(benchLease)
	return []pairLib{
		{nameRaw, rawLib(time.Millisecond), true, true, true},
		{nameBsm, bsmLib(nil), true, true, true},
		{nameRedsync, redsyncLib(1), true, true, true},
		{nameRedsync5, redsyncLib(5), false, false, false},
		{nameLockx, lockxRedisLib(false, lease), true, true, true},
		{nameLockxTry, lockxRedisLib(true, lease), true, false, false},
		{nameLockxMem, lockxMemLib(lease), false, false, true},
		{nameFencedFloor, fencedFloorLib(), true, true, false},
	}
}

// Goroutine counts of the uncontended table; the issue's rows are 1, 16 and
// 64, the others feed the scaling plot.
var (
	pairGoroutines = []int{1, 4, 16, 64, 256}
	issueCounts    = map[int]bool{1: true, 16: true, 64: true}
)

func groupGoroutines(n int) string {
	if n == 1 {
		return "1 goroutine"
	}
	return fmt.Sprintf("%d goroutines", n)
}

func uncontendedCases() []*Case {
	var cs []*Case
	for _, n := range pairGoroutines {
		for i, l := range pairLibs() {
			if !issueCounts[n] && !l.every {
				continue
			}
			cs = append(cs, &Case{
				Section:  scalingSection,
				Group:    groupGoroutines(n),
				Name:     l.name,
				Baseline: i == 0,
				Quick:    l.quick && (n == 1 || n == 64),
				Run: func(ctx context.Context, e *Env, p Params) (Sample, error) {
					return runPairs(ctx, e, p, l, n)
				},
			})
		}
	}
	return cs
}

// Paired uncontended rows (issue 31's 1- and 4-goroutine targets): a
// closed loop of one to four callers is bound by wake-up latency, which
// drifts by 2–3× over a run on a shared machine, so two rows measured a
// few seconds apart compare the machine's moments as much as the
// libraries. Here each goroutine runs a peer's pair, then lockx's, on its
// own key, alternately; pairs/s at a fixed number of callers is the
// inverse of the mean pair latency, so the ratio of the means is the
// ratio of the rates, with the drift falling on both sides alike.
var pairedUncontended = []int{1, 4}

func pairedVsName(peer string) string {
	return nameLockx + " vs " + peer + ", alternately"
}

func pairedUncontendedCases() []*Case {
	lease := lockx.WithLease(benchLease)
	var cs []*Case
	for _, n := range pairedUncontended {
		peers := []pairLib{{name: nameRaw, open: rawLib(time.Millisecond)}, {name: nameBsm, open: bsmLib(nil)},
			{name: nameFencedFloor, open: fencedFloorLib()}}
		for _, peer := range peers {
			cs = append(cs, &Case{
				Section: pairedSection, Group: groupGoroutines(n), Name: pairedVsName(peer.name),
				Run: func(ctx context.Context, e *Env, p Params) (Sample, error) {
					a, err := peer.open(ctx, e, PoolSize)
					if err != nil {
						return nil, err
					}
					defer a.Close()
					b, err := lockxRedisLib(false, lease)(ctx, e, PoolSize)
					if err != nil {
						return nil, err
					}
					defer b.Close()
					side := func(lk Locker, prefix string) func(context.Context, int) (time.Duration, error) {
						keys := make([]string, n)
						for i := range keys {
							keys[i] = fmt.Sprintf("%s:%d", prefix, i)
						}
						return func(ctx context.Context, w int) (time.Duration, error) {
							t := time.Now()
							err := lk.Pair(ctx, keys[w])
							return time.Since(t), err
						}
					}
					return runPairedN(ctx, p, n, side(a, "pu:a"), side(b, "pu:b"))
				},
			})
		}
	}
	return cs
}

// runPairs drives n goroutines, each acquiring and releasing its own key
// through one shared Locker (one process, go-redis pool of PoolSize).
func runPairs(ctx context.Context, e *Env, p Params, l pairLib, n int) (Sample, error) {
	var probes []probe
	if l.remote {
		probes = append(probes, e.cmdProbe())
	}
	return runPairsProbed(ctx, e, p, l.open, n, probes...)
}

// runPairsProbed is runPairs with the given probes.
func runPairsProbed(ctx context.Context, e *Env, p Params, open opener, n int, probes ...probe) (Sample, error) {
	lk, err := open(ctx, e, PoolSize)
	if err != nil {
		return nil, err
	}
	defer lk.Close()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("u:%d", i)
	}
	return drive(ctx, p, n, func(ctx context.Context, w int, r *recorder) {
		t := time.Now()
		if err := lk.Pair(ctx, keys[w]); err != nil {
			if ctx.Err() == nil {
				r.fail()
			}
			return
		}
		r.ok(time.Since(t))
	}, probes...), nil
}

// --- allocations per pair --------------------------------------------------

const allocSection = "allocs"

var benchTimeOnce sync.Once

// SetBenchTime sets how long each allocation benchmark runs (testing's
// -test.benchtime, 1 s by default).
func SetBenchTime(d time.Duration) {
	benchTimeOnce.Do(testing.Init)
	_ = flag.Set("test.benchtime", d.String())
}

func allocCases() []*Case {
	var cs []*Case
	for i, l := range pairLibs() {
		if l.name == nameLockxTry {
			continue
		}
		cs = append(cs, &Case{
			Section:  allocSection,
			Group:    "1 goroutine",
			Name:     l.name,
			Baseline: i == 0,
			Quick:    l.quick,
			Run: func(ctx context.Context, e *Env, p Params) (Sample, error) {
				return runAllocs(ctx, e, l)
			},
		})
	}
	return cs
}

// runAllocs measures one goroutine's acquire+release pairs with
// testing.Benchmark: allocations and bytes per pair as -benchmem reports
// them (every allocation of the process during the loop, including the
// library's background goroutines).
func runAllocs(ctx context.Context, e *Env, l pairLib) (Sample, error) {
	benchTimeOnce.Do(testing.Init)
	lk, err := l.open(ctx, e, PoolSize)
	if err != nil {
		return nil, err
	}
	defer lk.Close()
	const key = "a:0"
	for range 200 { // load scripts, fill the pool
		if err := lk.Pair(ctx, key); err != nil {
			return nil, err
		}
	}
	var perr error
	res := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := lk.Pair(ctx, key); err != nil && perr == nil {
				perr = err
			}
		}
	})
	if perr != nil {
		return nil, perr
	}
	if res.N == 0 {
		return nil, fmt.Errorf("bench: allocation benchmark did not run")
	}
	return Sample{
		"allocs/op": float64(res.AllocsPerOp()),
		"B/op":      float64(res.AllocedBytesPerOp()),
		"ns/op":     float64(res.NsPerOp()),
		mRate:       1e9 / float64(res.NsPerOp()),
	}, nil
}
