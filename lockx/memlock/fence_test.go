package memlock_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
)

func TestFenceStore(t *testing.T) {
	for name, store := range map[string]driver.FenceStore{
		"FenceStore": memlock.NewFenceStore(),
		"ZeroValue":  new(memlock.FenceStore),
		"Backend":    memlock.New(),
	} {
		t.Run(name, func(t *testing.T) { testFenceStore(t, store) })
	}
}

func testFenceStore(t *testing.T, store driver.FenceStore) {
	ctx := context.Background()
	steps := []struct {
		resource string
		token    lockx.Token
		seen     lockx.Token // 0: accepted
	}{
		{"a", 5, 0},
		{"a", 5, 0}, // equal: the same holder writes again
		{"a", 4, 5},
		{"a", 6, 0},
		{"a", 1, 6},
		{"b", 1, 0}, // resources are independent
		{"a", lockx.MaxToken, 0},
		{"a", 6, lockx.MaxToken},
	}
	for _, s := range steps {
		err := store.Fence(ctx, s.resource, s.token)
		if s.seen == 0 {
			if err != nil {
				t.Fatalf("Fence(%q, %d) = %v, want accepted", s.resource, s.token, err)
			}
			continue
		}
		var se *lockx.StaleTokenError
		if !errors.As(err, &se) || !errors.Is(err, lockx.ErrStaleToken) {
			t.Fatalf("Fence(%q, %d) = %v, want stale", s.resource, s.token, err)
		}
		if se.Resource != s.resource || se.Token != s.token || se.Seen != s.seen {
			t.Fatalf("Fence(%q, %d) = %+v, want seen %d", s.resource, s.token, se, s.seen)
		}
	}
	for _, bad := range []struct {
		resource string
		token    lockx.Token
	}{{"", 1}, {"a", 0}, {"a", lockx.MaxToken + 1}} {
		if err := store.Fence(ctx, bad.resource, bad.token); !errors.Is(err, lockx.ErrInvalidArgument) {
			t.Errorf("Fence(%q, %d) = %v, want ErrInvalidArgument", bad.resource, bad.token, err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := store.Fence(cctx, "c", 1); !errors.Is(err, context.Canceled) {
		t.Errorf("Fence on a cancelled context = %v", err)
	}
}

// Concurrent writers: whatever the interleaving, no token is accepted after a
// greater one.
func TestFenceStoreConcurrent(t *testing.T) {
	store := memlock.NewFenceStore()
	ctx := context.Background()
	var (
		mu       sync.Mutex
		accepted []lockx.Token
		wg       sync.WaitGroup
	)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 1; i <= 200; i++ {
				tok := lockx.Token(i*8 + w)
				mu.Lock() // order the record with the fence call
				if store.Fence(ctx, "r", tok) == nil {
					accepted = append(accepted, tok)
				}
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	for i := 1; i < len(accepted); i++ {
		if accepted[i] < accepted[i-1] {
			t.Fatalf("token %d accepted after %d", accepted[i], accepted[i-1])
		}
	}
	if got := store.Seen("r"); got != accepted[len(accepted)-1] {
		t.Fatalf("Seen = %d, want %d", got, accepted[len(accepted)-1])
	}
}

func TestBackendFenceStateIsPerBackend(t *testing.T) {
	ctx := context.Background()
	b1, b2 := memlock.New(), memlock.New()
	if err := b1.Fence(ctx, "r", 9); err != nil {
		t.Fatal(err)
	}
	if err := b2.Fence(ctx, "r", 1); err != nil {
		t.Fatalf("second backend shares fence state: %v", err)
	}
	if err := b1.Fence(ctx, "r", 1); !errors.Is(err, lockx.ErrStaleToken) {
		t.Fatalf("first backend forgot its fence: %v", err)
	}
	runtime.KeepAlive(b1)
}

func ExampleNewFenceStore() {
	ctx := context.Background()
	locks := lockx.New(memlock.New())
	defer locks.Close()
	fences := memlock.NewFenceStore()

	l, _ := locks.Acquire(ctx, "doc/1")
	defer l.Release(ctx)
	if err := fences.Fence(ctx, "doc/1", l.Token()); err != nil {
		fmt.Println("refused:", err)
		return
	}
	fmt.Println("write accepted with token", l.Token())
	// Output: write accepted with token 1
}
