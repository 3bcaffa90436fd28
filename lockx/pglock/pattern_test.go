package pglock_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/lockxtest"
	"github.com/lockx-go/lockx/lockx/pglock"
	"github.com/lockx-go/lockx/patterns/semaphore"
)

// patternBackend returns a factory of Backends on one schema, each with one
// holder session, as separate processes would have.
func patternBackend(e *env) func(t *testing.T) lockx.Backend {
	return func(t *testing.T) lockx.Backend {
		b := pglock.New(e.pool, pglock.WithSchema(e.schema), pglock.WithSessions(1))
		t.Cleanup(func() { _ = b.Close() })
		if err := b.Connect(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		return b
	}
}

func TestRWConformance(t *testing.T) {
	e := newEnv(t, 40)
	lockxtest.RunRW(t, patternBackend(e))
}

func TestSemaphoreConformance(t *testing.T) {
	e := newEnv(t, 40)
	lockxtest.RunSemaphore(t, patternBackend(e))
}

// TestSemaphoreAcrossProcesses has several Backends (processes) contend for
// one semaphore: the limit is never exceeded at any moment.
func TestSemaphoreAcrossProcesses(t *testing.T) {
	e := newEnv(t, 24)
	const limit, procs, workers, rounds = 3, 3, 4, 8
	ctx := ctxT(t, 60*time.Second)
	k := "sem-" + randHex(4)
	var in, peak atomic.Int64
	var wg sync.WaitGroup
	for p := 0; p < procs; p++ {
		c, _ := e.client(t, pglock.WithSessions(1))
		sem := semaphore.New(c, k, limit)
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := 0; r < rounds; r++ {
					pm, err := sem.Acquire(ctx, lockx.WithLease(5*time.Second))
					if err != nil {
						t.Error(err)
						return
					}
					n := in.Add(1)
					for {
						old := peak.Load()
						if n <= old || peak.CompareAndSwap(old, n) {
							break
						}
					}
					time.Sleep(2 * time.Millisecond)
					in.Add(-1)
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
		t.Fatalf("peak holders %d, limit %d", p, limit)
	}
}
