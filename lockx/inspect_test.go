package lockx_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
)

func TestForceUnlock(t *testing.T) {
	ctx := context.Background()
	b := memlock.New()
	c := lockx.New(b)
	defer c.Close()
	l, err := c.Acquire(ctx, "jobs/1")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Fence(ctx, "jobs/1", l.Token()); err != nil {
		t.Fatal(err)
	}
	info, err := lockx.ForceUnlock(ctx, b, "jobs/1")
	if err != nil {
		t.Fatal(err)
	}
	if info.Owner != l.Owner() || info.Token != l.Token() {
		t.Fatalf("evicted %+v, want the holder %s/%d", info, l.Owner(), l.Token())
	}
	// The evicted holder's writes are fenced off; the next holder's are not.
	if err := b.Fence(ctx, "jobs/1", l.Token()); !errors.Is(err, lockx.ErrStaleToken) {
		t.Fatalf("evicted holder's write: %v, want stale", err)
	}
	l2, err := c.TryAcquire(ctx, "jobs/1")
	if err != nil {
		t.Fatalf("after force-unlock: %v", err)
	}
	if err := b.Fence(ctx, "jobs/1", l2.Token()); err != nil {
		t.Fatalf("new holder's write: %v", err)
	}
	_ = l2.Release(ctx)
	if _, err := lockx.ForceUnlock(ctx, b, "jobs/1"); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("force-unlock of a free key: %v", err)
	}
}

func TestInspectorAndLongHolders(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := memlock.New()
	c := lockx.New(b)
	defer c.Close()
	for _, k := range []string{"a/1", "a/2", "b/1"} {
		if _, err := c.Acquire(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	var keys []string
	if err := b.Locks(ctx, "a/", func(li lockx.LockInfo) bool { keys = append(keys, li.Key); return true }); err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || keys[0] != "a/1" || keys[1] != "a/2" {
		t.Fatalf("locks under a/: %v", keys)
	}
	var mu sync.Mutex
	flagged := map[string]int{}
	done := make(chan error, 1)
	go func() {
		done <- lockx.WatchLongHolders(ctx, b, lockx.LongHolderWatch{
			Prefix: "a/", Threshold: 60 * time.Millisecond, Interval: 20 * time.Millisecond,
			OnLongHolder: func(li lockx.LockInfo) {
				mu.Lock()
				flagged[li.Key]++
				mu.Unlock()
			},
		})
	}()
	time.Sleep(200 * time.Millisecond)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("WatchLongHolders: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if flagged["a/1"] != 1 || flagged["a/2"] != 1 || len(flagged) != 2 {
		t.Fatalf("flagged %v, want a/1 and a/2 once each", flagged)
	}
}
