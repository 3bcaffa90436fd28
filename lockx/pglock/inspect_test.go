package pglock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
)

func TestInspect(t *testing.T) {
	e := newEnv(t, 8)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	holder, hb := e.client(t)
	waiter, _ := e.client(t)
	held := map[string]*lockx.Lock{}
	for _, k := range []string{"jobs/1", "jobs/2", "other"} {
		l, err := holder.Acquire(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		held[k] = l
	}
	freed, err := holder.Acquire(ctx, "jobs/freed")
	if err != nil {
		t.Fatal(err)
	}
	if err := freed.Release(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // a measurable age

	var got []lockx.LockInfo
	if err := hb.Locks(ctx, "jobs/", func(li lockx.LockInfo) bool { got = append(got, li); return true }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Key != "jobs/1" || got[1].Key != "jobs/2" {
		t.Fatalf("Locks(jobs/) = %+v", got)
	}
	for _, li := range got {
		l := held[li.Key]
		if li.Owner != l.Owner() || li.Token != l.Token() || li.TTL <= 0 || li.Age <= 0 || li.Waiters != 0 {
			t.Errorf("%+v, want owner %s token %d", li, l.Owner(), l.Token())
		}
	}
	if _, err := hb.Lock(ctx, "jobs/freed"); !errors.Is(err, lockx.ErrNotHeld) {
		t.Errorf("Lock of a released key: %v", err)
	}

	// A fair waiter is counted; ForceUnlock evicts the holder, fences its
	// token off and hands the lock to the waiter.
	got2 := make(chan *lockx.Lock, 1)
	go func() {
		l, err := waiter.Acquire(ctx, "jobs/1", lockx.Fair())
		if err != nil {
			t.Error(err)
		}
		got2 <- l
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		li, err := hb.Lock(ctx, "jobs/1")
		if err != nil {
			t.Fatal(err)
		}
		if li.Waiters == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiter not counted: %+v", li)
		}
		time.Sleep(10 * time.Millisecond)
	}
	info, err := lockx.ForceUnlock(ctx, hb, "jobs/1")
	if err != nil {
		t.Fatal(err)
	}
	if info.Token != held["jobs/1"].Token() {
		t.Fatalf("evicted %+v", info)
	}
	w := <-got2
	if w == nil {
		t.FailNow()
	}
	if err := hb.Fence(ctx, "jobs/1", info.Token); !errors.Is(err, lockx.ErrStaleToken) {
		t.Errorf("evicted holder's write: %v, want stale", err)
	}
	if err := hb.Fence(ctx, "jobs/1", w.Token()); err != nil {
		t.Errorf("new holder's write: %v", err)
	}
	_ = w.Release(ctx)
}
