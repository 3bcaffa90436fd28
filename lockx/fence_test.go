package lockx_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
)

func TestStaleTokenError(t *testing.T) {
	var err error = fmt.Errorf("write: %w", &lockx.StaleTokenError{Resource: "acct/1", Token: 33, Seen: 34})
	if !errors.Is(err, lockx.ErrStaleToken) {
		t.Fatalf("errors.Is(%v, ErrStaleToken) = false", err)
	}
	var se *lockx.StaleTokenError
	if !errors.As(err, &se) || se.Token != 33 || se.Seen != 34 || se.Resource != "acct/1" {
		t.Fatalf("errors.As = %+v", se)
	}
	if got := se.Error(); !strings.HasPrefix(got, "lockx: ") || !strings.Contains(got, "33") || !strings.Contains(got, "34") {
		t.Errorf("Error() = %q", got)
	}
	if errors.Is(err, lockx.ErrNotHeld) {
		t.Error("a stale token must not match ErrNotHeld")
	}
}

func TestCheckFenceArgs(t *testing.T) {
	for _, tc := range []struct {
		resource string
		token    lockx.Token
		ok       bool
	}{
		{"r", 1, true},
		{"r", lockx.MaxToken, true},
		{strings.Repeat("r", lockx.DefaultMaxKeyLen), 7, true},
		{"", 1, false},
		{strings.Repeat("r", lockx.DefaultMaxKeyLen+1), 1, false},
		{"r", 0, false},
		{"r", lockx.MaxToken + 1, false},
	} {
		err := driver.CheckFenceArgs(tc.resource, tc.token)
		if (err == nil) != tc.ok {
			t.Errorf("CheckFenceArgs(%d bytes, %d) = %v, want ok=%v", len(tc.resource), tc.token, err, tc.ok)
		}
		if err != nil && !errors.Is(err, lockx.ErrInvalidArgument) {
			t.Errorf("CheckFenceArgs error %v does not match ErrInvalidArgument", err)
		}
	}
}

func TestContextWithLock(t *testing.T) {
	ctx := context.Background()
	if _, ok := lockx.LockFromContext(ctx); ok {
		t.Fatal("empty context carries a lock")
	}
	if got := lockx.ContextWithLock(ctx, nil); got != ctx {
		t.Fatal("ContextWithLock(ctx, nil) changed the context")
	}
	locks := lockx.New(memlock.New())
	defer locks.Close()
	l, err := locks.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	lctx := lockx.ContextWithLock(l.Context(), l)
	got, ok := lockx.LockFromContext(lctx)
	if !ok || got != l || got.Token() != l.Token() || got.Key() != "k" {
		t.Fatalf("LockFromContext = %v, %v", got, ok)
	}
	// The context carries the owner too: acquiring again under it re-enters.
	l2, err := locks.TryAcquire(lockx.ContextWithLock(ctx, l), "k")
	if err != nil {
		t.Fatalf("re-entry under ContextWithLock: %v", err)
	}
	if l2.Token() != l.Token() {
		t.Errorf("re-entered token %d, want %d", l2.Token(), l.Token())
	}
	if err := l2.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// The core promise: a holder whose lease ran out while it was stalled is
// fenced off by the resource once the next holder has written.
func TestFenceRejectsHolderThatLostItsLease(t *testing.T) {
	ctx := context.Background()
	b := memlock.New()
	locks := lockx.New(b)
	defer locks.Close()
	var store driver.FenceStore = b

	a, err := locks.Acquire(ctx, "invoice/7", lockx.WithLease(30*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	<-a.Lost() // A stalls past its lease
	bl, err := locks.Acquire(ctx, "invoice/7")
	if err != nil {
		t.Fatal(err)
	}
	defer bl.Release(ctx)
	if bl.Token() <= a.Token() {
		t.Fatalf("B's token %d not above A's %d", bl.Token(), a.Token())
	}
	if err := store.Fence(ctx, "invoice/7", bl.Token()); err != nil {
		t.Fatalf("B fenced: %v", err)
	}
	err = store.Fence(ctx, "invoice/7", a.Token())
	var se *lockx.StaleTokenError
	if !errors.As(err, &se) || se.Seen != bl.Token() || se.Token != a.Token() {
		t.Fatalf("A fenced: %v, want a stale token error", err)
	}
	_ = a.Release(ctx)
}

func ExampleFenceStore() {
	ctx := context.Background()
	var store driver.FenceStore = memlock.NewFenceStore()

	fmt.Println(store.Fence(ctx, "account/42", 34)) // B, the current holder
	fmt.Println(store.Fence(ctx, "account/42", 34)) // B again: equal is fine
	err := store.Fence(ctx, "account/42", 33)       // A, back from a GC pause
	fmt.Println(errors.Is(err, lockx.ErrStaleToken))
	fmt.Println(err)
	// Output:
	// <nil>
	// <nil>
	// true
	// lockx: stale fencing token 33 for "account/42": 34 already seen
}

func ExampleContextWithLock() {
	ctx := context.Background()
	locks := lockx.New(memlock.New())
	defer locks.Close()

	l, err := locks.Acquire(ctx, "report")
	if err != nil {
		panic(err)
	}
	defer l.Release(ctx)
	ctx = lockx.ContextWithLock(l.Context(), l)

	// Deep in the call stack, e.g. in an http.RoundTripper:
	if held, ok := lockx.LockFromContext(ctx); ok {
		fmt.Println(held.Key(), held.Token() > 0)
	}
	// Output: report true
}
