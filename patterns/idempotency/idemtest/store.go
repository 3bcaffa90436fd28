// Package idemtest is the conformance suite for driver.ResultStore
// implementations, in the manner of testing/fstest: a store passes if
// RunStore passes.
//
//	func TestResultStore(t *testing.T) {
//		idemtest.RunStore(t, func(t *testing.T) driver.ResultStore { return mystore.New(…) })
//	}
package idemtest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// RunStore checks the ResultStore contract: load of a missing key, the
// first outcome winning every later and concurrent save, retention, delete,
// argument errors and a cancelled context. newStore may return the same
// store for every subtest (keys are unique per run), as stores shared by
// several instances are.
func RunStore(t *testing.T, newStore func(t *testing.T) driver.ResultStore) {
	t.Helper()
	ctx := context.Background()
	key := func() string { return "idemtest:" + rand.Text() }
	out := func(v string) driver.Outcome {
		return driver.Outcome{Fingerprint: []byte("fp"), Value: []byte(v), Created: time.Now().Truncate(time.Millisecond)}
	}

	t.Run("Missing", func(t *testing.T) {
		s := newStore(t)
		if _, err := s.LoadResult(ctx, key()); !errors.Is(err, driver.ErrNoResult) {
			t.Fatalf("LoadResult(missing) = %v, want ErrNoResult", err)
		}
		if err := s.DeleteResult(ctx, key()); err != nil {
			t.Fatalf("DeleteResult(missing) = %v, want nil", err)
		}
	})

	t.Run("FirstWins", func(t *testing.T) {
		s, k := newStore(t), key()
		got, saved, err := s.SaveResult(ctx, k, out("one"), time.Minute)
		if err != nil || !saved || string(got.Value) != "one" {
			t.Fatalf("first SaveResult = %q, %v, %v; want one, true, nil", got.Value, saved, err)
		}
		got, saved, err = s.SaveResult(ctx, k, out("two"), time.Minute)
		if err != nil || saved || string(got.Value) != "one" {
			t.Fatalf("second SaveResult = %q, %v, %v; want one, false, nil", got.Value, saved, err)
		}
		got, err = s.LoadResult(ctx, k)
		if err != nil || string(got.Value) != "one" || string(got.Fingerprint) != "fp" || got.Created.IsZero() {
			t.Fatalf("LoadResult = %+v, %v; want the first outcome", got, err)
		}
	})

	t.Run("Failure", func(t *testing.T) {
		s, k := newStore(t), key()
		o := driver.Outcome{Failed: true, Err: "card declined", Code: "declined", Created: time.Now()}
		if _, _, err := s.SaveResult(ctx, k, o, time.Minute); err != nil {
			t.Fatal(err)
		}
		got, err := s.LoadResult(ctx, k)
		if err != nil || !got.Failed || got.Err != "card declined" || got.Code != "declined" || len(got.Value) != 0 {
			t.Fatalf("LoadResult = %+v, %v; want the stored failure", got, err)
		}
	})

	t.Run("ConcurrentSaves", func(t *testing.T) {
		s, k := newStore(t), key()
		const n = 32
		var wg sync.WaitGroup
		var mu sync.Mutex
		winners, values := 0, map[string]int{}
		for i := range n {
			wg.Go(func() {
				got, saved, err := s.SaveResult(ctx, k, out(fmt.Sprint(i)), time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if saved {
					winners++
				}
				values[string(got.Value)]++
			})
		}
		wg.Wait()
		if winners != 1 || len(values) != 1 {
			t.Fatalf("%d saves won and %d distinct outcomes were returned, want 1 and 1", winners, len(values))
		}
	})

	t.Run("Retention", func(t *testing.T) {
		s, k := newStore(t), key()
		if _, _, err := s.SaveResult(ctx, k, out("old"), 150*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		if _, err := s.LoadResult(ctx, k); !errors.Is(err, driver.ErrNoResult) {
			t.Fatalf("LoadResult after retention = %v, want ErrNoResult", err)
		}
		got, saved, err := s.SaveResult(ctx, k, out("new"), time.Minute)
		if err != nil || !saved || string(got.Value) != "new" {
			t.Fatalf("SaveResult after retention = %q, %v, %v; want new, true, nil", got.Value, saved, err)
		}
	})

	t.Run("Delete", func(t *testing.T) {
		s, k := newStore(t), key()
		if _, _, err := s.SaveResult(ctx, k, out("x"), time.Minute); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteResult(ctx, k); err != nil {
			t.Fatal(err)
		}
		if _, err := s.LoadResult(ctx, k); !errors.Is(err, driver.ErrNoResult) {
			t.Fatalf("LoadResult after delete = %v, want ErrNoResult", err)
		}
		if _, saved, err := s.SaveResult(ctx, k, out("y"), time.Minute); err != nil || !saved {
			t.Fatalf("SaveResult after delete = %v, %v; want saved", saved, err)
		}
	})

	t.Run("Arguments", func(t *testing.T) {
		s := newStore(t)
		long := string(make([]byte, lockx.DefaultMaxKeyLen+1))
		for _, tc := range []struct {
			name string
			err  error
		}{
			{"LoadEmpty", func() error { _, err := s.LoadResult(ctx, ""); return err }()},
			{"LoadLong", func() error { _, err := s.LoadResult(ctx, long); return err }()},
			{"SaveEmpty", func() error { _, _, err := s.SaveResult(ctx, "", out("x"), time.Minute); return err }()},
			{"SaveZeroRetention", func() error { _, _, err := s.SaveResult(ctx, key(), out("x"), 0); return err }()},
			{"DeleteEmpty", s.DeleteResult(ctx, "")},
		} {
			if !errors.Is(tc.err, lockx.ErrInvalidArgument) {
				t.Errorf("%s: err = %v, want ErrInvalidArgument", tc.name, tc.err)
			}
		}
	})

	t.Run("Cancelled", func(t *testing.T) {
		s := newStore(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, _, err := s.SaveResult(cctx, key(), out("x"), time.Minute); err == nil {
			t.Fatal("SaveResult with a cancelled context succeeded")
		}
	})
}
