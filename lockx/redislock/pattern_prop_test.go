package redislock_test

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// margin absorbs the scheduling and round-trip jitter between the local clock
// and the server's when the model decides whether a lease is certainly live
// or certainly over.
const margin = 15 * time.Millisecond

// lease is the model's view of one hold: granted after sent, answered at got.
// A call's verdict happened on the server between its own send and reply, so
// a hold counts against it if live at the reply (live(reply)) and counts as
// gone if over at the send (over(sent)).
type lease struct {
	sent, got time.Time
	d         time.Duration
	n         int64
}

func (l lease) live(now time.Time) bool { return now.Before(l.sent.Add(l.d - margin)) }
func (l lease) over(now time.Time) bool { return now.After(l.got.Add(l.d + margin)) }

// TestRWRandomInterleavings drives several backends (clients) on one key with
// random reads, writes, renewals, releases and crashes (holders that stop
// renewing), and checks every grant against the holds that are certainly
// live: never a writer beside another owner's hold, never a reader beside
// another owner's writer.
func TestRWRandomInterleavings(t *testing.T) {
	rdb := single(t)
	prefix := testPrefix()
	var bs []*redislock.Backend
	for i := 0; i < 3; i++ {
		bs = append(bs, backend(t, rdb, redislock.WithPrefix(prefix)))
	}
	ctx := ctxT(t, time.Minute)
	owners := []lockx.Owner{"a", "b", "c", "d"}
	modes := []driver.RWMode{driver.ModeRead, driver.ModeWrite}
	for seed := uint64(0); seed < 4; seed++ {
		rng := rand.New(rand.NewPCG(seed, 11))
		key := "prop:" + randHex(4)
		type hk struct {
			o lockx.Owner
			m driver.RWMode
		}
		holds := map[hk]lease{}
		for step := 0; step < 120; step++ {
			b := bs[rng.IntN(len(bs))]
			o, m := owners[rng.IntN(len(owners))], modes[rng.IntN(2)]
			d := time.Duration(60+rng.IntN(200)) * time.Millisecond
			sent := time.Now()
			switch rng.IntN(5) {
			case 0, 1:
				res, err := b.AcquireRW(ctx, m, driver.Request{Key: key, Owner: o, Lease: d, Fair: rng.IntN(2) == 0, Wait: rng.IntN(2) == 0, QueueTTL: 300 * time.Millisecond})
				if errors.Is(err, driver.ErrUpgrade) {
					continue
				}
				if err != nil {
					t.Fatalf("seed %d step %d: %v", seed, step, err)
				}
				if !res.Acquired {
					continue
				}
				for h, l := range holds {
					if h.o == o || !l.live(time.Now()) {
						continue
					}
					if m == driver.ModeWrite || h.m == driver.ModeWrite {
						t.Fatalf("seed %d step %d: %v granted to %s beside live %v of %s", seed, step, m, o, h.m, h.o)
					}
				}
				holds[hk{o, m}] = lease{sent: sent, got: time.Now(), d: d}
			case 2:
				err := b.ReleaseRW(ctx, m, key, o)
				l, ok := holds[hk{o, m}]
				if ok && l.live(time.Now()) && err != nil {
					t.Fatalf("seed %d step %d: release of a live %v hold: %v", seed, step, m, err)
				}
				if (!ok || l.over(sent)) && !errors.Is(err, lockx.ErrNotHeld) {
					t.Fatalf("seed %d step %d: release of no hold = %v", seed, step, err)
				}
				delete(holds, hk{o, m})
			case 3:
				err := b.ExtendRW(ctx, m, key, o, d)
				l, ok := holds[hk{o, m}]
				if ok && l.live(time.Now()) && err != nil {
					t.Fatalf("seed %d step %d: extend of a live %v hold: %v", seed, step, m, err)
				}
				if err == nil {
					holds[hk{o, m}] = lease{sent: sent, got: time.Now(), d: d}
				} else {
					delete(holds, hk{o, m})
				}
			case 4: // time passes; crashed holders simply stop renewing
				time.Sleep(time.Duration(rng.IntN(80)) * time.Millisecond)
			}
		}
	}
}

// TestSemaphoreRandomInterleavings: the permits of certainly-live leases
// plus a new grant never exceed its limit, across several clients, weighted
// requests, renewals, releases and crashes.
func TestSemaphoreRandomInterleavings(t *testing.T) {
	rdb := single(t)
	prefix := testPrefix()
	var bs []*redislock.Backend
	for i := 0; i < 3; i++ {
		bs = append(bs, backend(t, rdb, redislock.WithPrefix(prefix)))
	}
	ctx := ctxT(t, time.Minute)
	owners := []lockx.Owner{"a", "b", "c", "d", "e", "f"}
	for seed := uint64(0); seed < 4; seed++ {
		rng := rand.New(rand.NewPCG(seed, 13))
		key := "prop:" + randHex(4)
		const limit = 3
		holds := map[lockx.Owner]lease{}
		// The count of each owner's latest fair waiting refusal, since its
		// last grant or release: a release may hand it that many permits.
		queued := map[lockx.Owner]int64{}
		for step := 0; step < 120; step++ {
			b := bs[rng.IntN(len(bs))]
			o := owners[rng.IntN(len(owners))]
			d := time.Duration(60+rng.IntN(200)) * time.Millisecond
			sent := time.Now()
			switch rng.IntN(5) {
			case 0, 1:
				n := int64(1 + rng.IntN(limit))
				r := driver.Request{Key: key, Owner: o, Lease: d, Fair: rng.IntN(2) == 0, Wait: rng.IntN(2) == 0, QueueTTL: 300 * time.Millisecond}
				res, err := b.AcquirePermits(ctx, driver.PermitRequest{Request: r, Limit: limit, Count: n})
				if err != nil {
					t.Fatalf("seed %d step %d: %v", seed, step, err)
				}
				if !res.Acquired {
					if r.Fair && r.Wait {
						queued[o] = n
					}
					continue
				}
				qn, wasQueued := queued[o]
				delete(queued, o)
				if prev, again := holds[o]; !wasQueued && again && !prev.over(sent) {
					n = prev.n // a holder's repeat keeps its permits
				} else {
					if wasQueued {
						// Either granted now, or the permits a release
						// handed over while it waited: the fewer of the two.
						n = min(n, qn)
					}
					used := n
					for h, l := range holds {
						if h != o && l.live(time.Now()) {
							used += l.n
						}
					}
					if used > limit {
						t.Fatalf("seed %d step %d: %d permits in use, limit %d", seed, step, used, limit)
					}
				}
				holds[o] = lease{sent: sent, got: time.Now(), d: d, n: n}
			case 2:
				err := b.ReleasePermits(ctx, key, o)
				l, ok := holds[o]
				if ok && l.live(time.Now()) && err != nil {
					t.Fatalf("seed %d step %d: release of live permits: %v", seed, step, err)
				}
				delete(holds, o)
				delete(queued, o)
			case 3:
				err := b.ExtendPermits(ctx, key, o, d)
				l, ok := holds[o]
				if ok && l.live(time.Now()) && err != nil {
					t.Fatalf("seed %d step %d: extend of live permits: %v", seed, step, err)
				}
				if err == nil {
					if qn, handed := queued[o]; handed {
						// It held nothing when last refused: a release has
						// handed it the permits its queue entry asked for.
						l.n = qn
						delete(queued, o)
					}
					l.sent, l.got, l.d = sent, time.Now(), d
					holds[o] = l
				} else {
					delete(holds, o)
				}
			case 4:
				time.Sleep(time.Duration(rng.IntN(80)) * time.Millisecond)
			}
		}
	}
}
