package memlock

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// fakeClock is a manual clock for the backend's now.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// TestRWRandomInterleavings drives the backend with random acquisitions,
// renewals, releases, crashes (holders that stop renewing) and clock jumps
// across owners, and checks after every step against a model of the live
// leases: never a writer beside another owner's hold, and write tokens
// strictly increasing.
func TestRWRandomInterleavings(t *testing.T) {
	ctx := context.Background()
	owners := []lockx.Owner{"a", "b", "c", "d", "e"}
	modes := []driver.RWMode{driver.ModeRead, driver.ModeWrite}
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 5))
		clk := &fakeClock{t: time.Unix(1e9, 0)}
		b := New()
		b.now = clk.now
		type hold struct {
			owner lockx.Owner
			mode  driver.RWMode
		}
		live := map[hold]time.Time{} // the model: lease end of each hold
		var lastWrite lockx.Token
		for step := 0; step < 200; step++ {
			o := owners[rng.IntN(len(owners))]
			m := modes[rng.IntN(2)]
			lease := time.Duration(1+rng.IntN(5)) * time.Second
			switch rng.IntN(5) {
			case 0, 1:
				req := driver.Request{Key: "k", Owner: o, Lease: lease, Fair: rng.IntN(2) == 0, Wait: rng.IntN(2) == 0, QueueTTL: 3 * time.Second}
				res, err := b.AcquireRW(ctx, m, req)
				if err != nil {
					if err != driver.ErrUpgrade {
						t.Fatalf("seed %d step %d: AcquireRW: %v", seed, step, err)
					}
					continue
				}
				if res.Acquired {
					h := hold{o, m}
					if _, again := live[h]; !again && m == driver.ModeWrite {
						if res.Token <= lastWrite {
							t.Fatalf("seed %d step %d: write token %v not above %v", seed, step, res.Token, lastWrite)
						}
						lastWrite = res.Token
					}
					live[h] = clk.t.Add(lease)
				}
			case 2:
				err := b.ReleaseRW(ctx, m, "k", o)
				if _, held := live[hold{o, m}]; held != (err == nil) {
					t.Fatalf("seed %d step %d: ReleaseRW = %v, model says held=%v", seed, step, err, held)
				}
				delete(live, hold{o, m})
			case 3:
				err := b.ExtendRW(ctx, m, "k", o, lease)
				if _, held := live[hold{o, m}]; held != (err == nil) {
					t.Fatalf("seed %d step %d: ExtendRW = %v, model says held=%v", seed, step, err, held)
				}
				if err == nil {
					live[hold{o, m}] = clk.t.Add(lease)
				}
			case 4: // time passes; crashed holders simply stop renewing
				clk.advance(time.Duration(rng.IntN(2500)) * time.Millisecond)
			}
			for h, end := range live {
				if !clk.t.Before(end) {
					delete(live, h)
				}
			}
			var writer lockx.Owner
			for h := range live {
				if h.mode == driver.ModeWrite {
					writer = h.owner
				}
			}
			for h := range live {
				if writer != "" && h.owner != writer {
					t.Fatalf("seed %d step %d: writer %s beside %v hold of %s", seed, step, writer, h.mode, h.owner)
				}
			}
		}
	}
}

// TestSemaphoreRandomInterleavings does the same for permits: the permits
// of live leases never exceed the limit of any grant, whatever the order of
// weighted acquisitions, releases, crashes and limit changes.
func TestSemaphoreRandomInterleavings(t *testing.T) {
	ctx := context.Background()
	owners := []lockx.Owner{"a", "b", "c", "d", "e", "f"}
	for seed := uint64(0); seed < 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		clk := &fakeClock{t: time.Unix(1e9, 0)}
		b := New()
		b.now = clk.now
		type permit struct {
			n   int64
			end time.Time
		}
		live := map[lockx.Owner]permit{}
		limit := int64(1 + rng.IntN(4))
		used := func() (n int64) {
			for _, p := range live {
				n += p.n
			}
			return n
		}
		for step := 0; step < 200; step++ {
			o := owners[rng.IntN(len(owners))]
			lease := time.Duration(1+rng.IntN(5)) * time.Second
			switch rng.IntN(6) {
			case 0, 1:
				n := int64(1 + rng.IntN(int(limit)))
				req := driver.PermitRequest{
					Request: driver.Request{Key: "k", Owner: o, Lease: lease, Fair: rng.IntN(2) == 0, Wait: rng.IntN(2) == 0, QueueTTL: 3 * time.Second},
					Limit:   limit, Count: n,
				}
				res, err := b.AcquirePermits(ctx, req)
				if err != nil {
					t.Fatalf("seed %d step %d: AcquirePermits: %v", seed, step, err)
				}
				if res.Acquired {
					p, again := live[o]
					if !again {
						p.n = n
					}
					p.end = clk.t.Add(lease)
					live[o] = p
					if u := used(); !again && u > limit {
						t.Fatalf("seed %d step %d: %d permits in use, limit %d", seed, step, u, limit)
					}
				}
			case 2:
				err := b.ReleasePermits(ctx, "k", o)
				if _, held := live[o]; held != (err == nil) {
					t.Fatalf("seed %d step %d: ReleasePermits = %v, model says held=%v", seed, step, err, held)
				}
				delete(live, o)
			case 3:
				err := b.ExtendPermits(ctx, "k", o, lease)
				if _, held := live[o]; held != (err == nil) {
					t.Fatalf("seed %d step %d: ExtendPermits = %v, model says held=%v", seed, step, err, held)
				}
				if err == nil {
					p := live[o]
					p.end = clk.t.Add(lease)
					live[o] = p
				}
			case 4:
				clk.advance(time.Duration(rng.IntN(2500)) * time.Millisecond)
			case 5: // a shrink revokes nothing; a grow lets more in
				limit = int64(1 + rng.IntN(4))
			}
			for o, p := range live {
				if !clk.t.Before(p.end) {
					delete(live, o)
				}
			}
			u, err := b.Permits(ctx, "k")
			if err != nil || u.InUse != used() || u.Holders != int64(len(live)) {
				t.Fatalf("seed %d step %d: Permits = %+v, %v; model %d in use by %d", seed, step, u, err, used(), len(live))
			}
		}
	}
}
