package backendtest

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/patterns/semaphore"
)

// SemaphoreContention has procs clients from newClient (each as a separate
// process would have its own) with workers goroutines each take permits of
// one semaphore with limit permits, rounds times — 1 or, if weighted, 1 or
// 2 at random — and hold them 1–4 ms. It fails t if the permits held ever
// exceed the limit, a token is granted twice, or an acquisition fails.
func SemaphoreContention(t *testing.T, newClient func() *lockx.Client, limit int64, procs, workers, rounds int, weighted bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	k := "sem-contention-" + string(lockx.NewOwner())[:8]
	var in, peak atomic.Int64
	var mu sync.Mutex
	tokens := make(map[lockx.Token]bool)
	var wg sync.WaitGroup
	for range procs {
		sem := semaphore.New(newClient(), k, limit)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range rounds {
					n := int64(1)
					if weighted {
						n += rand.Int64N(2)
					}
					pm, err := sem.AcquireN(ctx, n, lockx.WithLease(10*time.Second))
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					dup := tokens[pm.Token()]
					tokens[pm.Token()] = true
					mu.Unlock()
					if dup {
						t.Errorf("token %v granted twice", pm.Token())
					}
					now := in.Add(n)
					for old := peak.Load(); now > old && !peak.CompareAndSwap(old, now); old = peak.Load() {
					}
					time.Sleep(time.Duration(1+rand.IntN(4)) * time.Millisecond)
					in.Add(-n)
					if err := pm.Release(ctx); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	if p := peak.Load(); p > limit || p < 1 {
		t.Fatalf("peak permits %d, limit %d", p, limit)
	}
}
