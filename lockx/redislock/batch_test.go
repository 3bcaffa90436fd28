package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// TestBatchedStallStaysOnItsNode: on a Cluster, with one master stalled
// (CLIENT PAUSE), batched calls to the other masters go on, and the
// stalled node's error reaches only the call that went there.
func TestBatchedStallStaysOnItsNode(t *testing.T) {
	c := testenv.StartCluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs, MaxRetries: -1, ReadTimeout: 500 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	prefix := testPrefix()
	b := backend(t, rdb, redislock.WithPrefix(prefix)) // batched: the default
	ctx := ctxT(t, 30*time.Second)

	// A key on the first master and keys on the others.
	stalled := keysOn(t, rdb, prefix, c.Masters[0].Addr, true, 1)[0]
	others := keysOn(t, rdb, prefix, c.Masters[0].Addr, false, 8)
	o := lockx.NewOwner()
	mustGrant(t, b, req(others[0], o, time.Minute)) // scripts loaded, connections up
	if err := b.Release(ctx, others[0], o); err != nil {
		t.Fatal(err)
	}

	pauser := clientAt(t, c.Masters[0].Addr)
	// Long enough that no loaded machine takes as long for the healthy calls;
	// CLIENT PAUSE leaves the cluster bus alone, so nothing fails over.
	const pause = 10 * time.Second
	if err := pauser.Do(ctx, "client", "pause", pause.Milliseconds(), "all").Err(); err != nil {
		t.Fatal(err)
	}
	pausedAt := time.Now()

	// Calls to the other masters, from 8 goroutines at once (so through the
	// autopipeliner), while a call to the stalled master is under way.
	stalledDone := make(chan error, 1)
	go func() {
		sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		_, err := b.Acquire(sctx, req(stalled, lockx.NewOwner(), time.Minute))
		stalledDone <- err
	}()
	var wg sync.WaitGroup
	errs := make(chan error, len(others))
	for _, k := range others {
		wg.Go(func() {
			for range 20 {
				o := lockx.NewOwner()
				res, err := b.Acquire(ctx, req(k, o, time.Minute))
				if err == nil && !res.Acquired {
					err = errors.New("refused")
				}
				if err == nil {
					err = b.Release(ctx, k, o)
				}
				if err != nil {
					errs <- fmt.Errorf("key %q on a healthy node: %w", k, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if el := time.Since(pausedAt); el >= pause {
		t.Fatalf("the calls to healthy nodes ended %v after the pause began: they waited for the paused node", el)
	}
	// The stalled call's outcome is its own: an error once its context ended.
	if err := <-stalledDone; err == nil {
		t.Fatal("the call to the paused node succeeded")
	}
}

// keysOn returns n keys whose locks (under prefix) live on the master at
// addr (on is true) or on the other masters (on is false).
func keysOn(t *testing.T, rdb *redis.ClusterClient, prefix, addr string, on bool, n int) []string {
	t.Helper()
	var keys []string
	for k := 0; len(keys) < n; k++ {
		key := fmt.Sprintf("node:%t:%d", on, k)
		node, err := rdb.MasterForKey(context.Background(), prefix+"{"+key+"}")
		if err != nil {
			t.Fatal(err)
		}
		if (node.Options().Addr == addr) == on {
			keys = append(keys, key)
		}
	}
	return keys
}
