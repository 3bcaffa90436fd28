package bench

import (
	"context"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// Sample is one run of one case: named metrics such as "rate" (operations
// per second in the measured window), "p50", "p99" and "max" (milliseconds)
// and "fails". Cases add their own (commands per operation, CPU, bytes).
type Sample map[string]float64

// Metric names shared by the cases and the report.
const (
	mRate  = "rate"
	mP50   = "p50"
	mP99   = "p99"
	mMax   = "max"
	mFails = "fails"
	mCmds  = "cmds/op" // Redis commands per operation, from INFO commandstats
	mRTT   = "rtt/op"  // client round trips per operation, from a go-redis hook
	mViol  = "overlaps"
)

// hist is a log-linear latency histogram: 16 sub-buckets per power of two
// (about 6 % resolution), so recording never allocates and a run of millions
// of operations costs 8 KiB per worker.
type hist struct {
	n   [64 * 16]uint64
	max time.Duration
}

func bucketOf(v uint64) int {
	if v < 16 {
		return int(v)
	}
	e := bits.Len64(v) - 1 // v in [2^e, 2^(e+1))
	sub := (v >> (uint(e) - 4)) & 15
	return (e-3)*16 + int(sub)
}

// bucketValue is the midpoint of bucket i.
func bucketValue(i int) time.Duration {
	if i < 16 {
		return time.Duration(i)
	}
	e := uint(i/16 + 3)
	sub := uint64(i % 16)
	lo := (uint64(16) + sub) << (e - 4)
	return time.Duration(lo + (uint64(1)<<(e-4))/2)
}

func (h *hist) add(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.n[bucketOf(uint64(d))]++
	if d > h.max {
		h.max = d
	}
}

func (h *hist) merge(o *hist) {
	for i, c := range o.n {
		h.n[i] += c
	}
	h.max = max(h.max, o.max)
}

func (h *hist) count() uint64 {
	var t uint64
	for _, c := range h.n {
		t += c
	}
	return t
}

// quantile returns the q-quantile (0 < q ≤ 1), capped at the exact maximum.
func (h *hist) quantile(q float64) time.Duration {
	total := h.count()
	if total == 0 {
		return 0
	}
	rank := uint64(q*float64(total) + 0.5)
	rank = max(rank, 1)
	var seen uint64
	for i, c := range h.n {
		seen += c
		if seen >= rank {
			return min(bucketValue(i), h.max)
		}
	}
	return h.max
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// recorder is one worker's tally. Operations count only while the window is
// open, so the warm-up and the drain after the window are excluded.
type recorder struct {
	open  *atomic.Bool
	ops   int64
	fails int64
	lat   hist
}

// ok records one operation that completed now and took d.
func (r *recorder) ok(d time.Duration) {
	if r.open.Load() {
		r.ops++
		r.lat.add(d)
	}
}

// fail records a failed call.
func (r *recorder) fail() {
	if r.open.Load() {
		r.fails++
	}
}

// probe takes a reading at the start and at the end of the measured window
// and adds what it saw to the sample (e.g. Redis commands per operation).
type probe interface {
	begin(ctx context.Context)
	end(ctx context.Context, s Sample, window time.Duration)
}

// Params are the timing parameters of one run of a case.
type Params struct {
	Warmup   time.Duration
	Duration time.Duration
	Quick    bool // -quick: cases may shrink their set-up (fewer held locks)
}

// drive runs op in n goroutines: warm-up, then the measured window, then it
// cancels op's context and waits for every worker. op performs one
// operation and records it; it is called again until the context ends.
func drive(ctx context.Context, p Params, n int, op func(ctx context.Context, w int, r *recorder), probes ...probe) Sample {
	var open atomic.Bool
	recs := make([]*recorder, n)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for w := range n {
		recs[w] = &recorder{open: &open}
		wg.Go(func() {
			for runCtx.Err() == nil {
				op(runCtx, w, recs[w])
			}
		})
	}
	sleep(ctx, p.Warmup)
	for _, pr := range probes {
		pr.begin(ctx)
	}
	start := time.Now()
	open.Store(true)
	sleep(ctx, p.Duration)
	open.Store(false)
	window := time.Since(start)
	cancel()
	wg.Wait()

	s := Sample{}
	var all hist
	var ops, fails int64
	for _, r := range recs {
		all.merge(&r.lat)
		ops += r.ops
		fails += r.fails
	}
	s[mRate] = float64(ops) / window.Seconds()
	s[mFails] = float64(fails)
	if all.count() > 0 {
		s[mP50] = ms(all.quantile(0.50))
		s[mP99] = ms(all.quantile(0.99))
		s[mMax] = ms(all.max)
	}
	for _, pr := range probes {
		pr.end(context.WithoutCancel(ctx), s, window)
	}
	return s
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
