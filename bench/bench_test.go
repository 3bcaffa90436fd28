package bench

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// benchEnv is started by TestMain only when benchmarks run, so `go test`
// and `go vet` need no Redis.
var benchEnv *Env

func TestMain(m *testing.M) {
	os.Exit(func() int {
		benchEnv = NewEnv("postgres://postgres@127.0.0.1:5432/test")
		defer benchEnv.Close()
		return m.Run()
	}())
}

// BenchmarkPair is the allocation table as a go test benchmark, with the
// Redlock rows (redsync on 5 servers is in pairLibs already):
//
//	cd bench && go test -run '^$' -bench Pair -benchmem
func BenchmarkPair(b *testing.B) {
	ctx := context.Background()
	for _, l := range append(pairLibs(), redlockLibs()[1:]...) {
		if l.name == nameLockxTry {
			continue
		}
		b.Run(l.name, func(b *testing.B) {
			lk, err := l.open(ctx, benchEnv, PoolSize)
			if err != nil {
				b.Skip(err)
			}
			defer lk.Close()
			if err := lk.Pair(ctx, "a:0"); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := lk.Pair(ctx, "a:0"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestHistQuantiles(t *testing.T) {
	var h hist
	for i := 1; i <= 1000; i++ {
		h.add(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.99, 990 * time.Microsecond}, {1, 1000 * time.Microsecond}} {
		got := h.quantile(c.q)
		if d := float64(got-c.want) / float64(c.want); d < -0.07 || d > 0.07 {
			t.Errorf("quantile(%v) = %v, want %v ± 7%%", c.q, got, c.want)
		}
	}
	if h.max != time.Millisecond {
		t.Errorf("max = %v", h.max)
	}
	for v := range uint64(1 << 20) {
		if i := bucketOf(v); bucketValue(i) > time.Duration(v)*17/16+1 || bucketValue(i)*17/16+1 < time.Duration(v) {
			t.Fatalf("bucket of %d is %d with value %v", v, i, bucketValue(i))
		}
	}
}

func TestRatiosPerRun(t *testing.T) {
	a := &Result{Case: &Case{}, Runs: []Sample{{mRate: 10}, nil, {mRate: 30}}}
	b := &Result{Case: &Case{}, Runs: []Sample{{mRate: 5}, {mRate: 7}, {mRate: 10}}}
	got := ratios(a, b, mRate)
	if fmt.Sprint(got) != "[2 3]" {
		t.Fatalf("ratios = %v, want [2 3]", got)
	}
	if m := median([]float64{3, 1, 2, 10}); m != 2.5 {
		t.Fatalf("median = %v", m)
	}
}

// The paired target takes the rate ratio from the mean latencies (lockx
// the b side), per run, and the worst peer decides.
func TestPairedRateTarget(t *testing.T) {
	why := func(float64) string { return "why" }
	raw := &Result{Case: &Case{Name: "vs raw"}, Runs: []Sample{{mPairA + " mean": 100, mPairB + " mean": 90}, {mPairA + " mean": 100, mPairB + " mean": 110}, {mPairA + " mean": 120, mPairB + " mean": 100}}}
	bsm := &Result{Case: &Case{Name: "vs bsm"}, Runs: []Sample{{mPairA + " mean": 100, mPairB + " mean": 50}}}
	got := pairedRateTarget("31", "x", 1.0, why, raw, bsm)
	if got.status != statusMet {
		t.Fatalf("status %q, want met (median of 1.11, 0.91, 1.2 is 1.11): %s", got.status, got.detail)
	}
	slow := &Result{Case: &Case{Name: "vs slow"}, Runs: []Sample{{mPairA + " mean": 100, mPairB + " mean": 125}}}
	if got := pairedRateTarget("31", "x", 1.0, why, raw, slow); !strings.Contains(got.status, "0.80× (vs slow)") {
		t.Fatalf("status %q, want missed at 0.80× against the slow peer", got.status)
	}
	if got := pairedRateTarget("31", "x", 0.75, why, slow); got.status != statusMet {
		t.Fatalf("status %q, want met: 0.80× against a bound of 0.75×", got.status)
	}
	if got := pairedRateTarget("31", "x", 1.0, why, raw, nil); got.status != statusNA {
		t.Fatalf("a missing peer: status %q, want %q", got.status, statusNA)
	}
}

// A cost printed at its floor is at its floor; one above it is not.
func TestFloorTarget(t *testing.T) {
	if got := floorTarget("x", 2.0004, 2); got.status != statusMet {
		t.Fatalf("2.0004 against 2: %q", got.status)
	}
	if got := floorTarget("x", 2.02, 2); got.status == statusMet {
		t.Fatalf("2.02 against 2: met")
	}
	r := &Result{Case: &Case{}, Runs: []Sample{{mP99: 4}, {mP99: 6}, {mP99: 5}}}
	if got := limitTarget("31", "x", r, mP99, 5, true, "ms", func(float64) string { return "" }); got.status != statusMet {
		t.Fatalf("p99 median 5 against ≤ 5: %q", got.status)
	}
	if got := limitTarget("31", "x", r, mP99, 7000, false, "/s", func(float64) string { return "" }); got.status == statusMet {
		t.Fatalf("5 against ≥ 7000: met")
	}
}
