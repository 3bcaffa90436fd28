package zklock_test

import (
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/zklock"
)

func TestInspect(t *testing.T) {
	z := testenv.SharedZooKeeper(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	root := zklock.WithRoot("/lockx-inspect")
	hb := dial(t, z.Addr, root)
	holder := lockx.New(hb)
	defer holder.Close()
	ob := dial(t, z.Addr, root) // another process: an operator's tool
	waiter := lockx.New(dial(t, z.Addr, root))
	defer waiter.Close()

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
	if err := ob.Locks(ctx, "jobs/", func(li lockx.LockInfo) bool { got = append(got, li); return true }); err != nil {
		t.Fatal(err)
	}
	sort.Slice(got, func(i, j int) bool { return got[i].Key < got[j].Key })
	if len(got) != 2 || got[0].Key != "jobs/1" || got[1].Key != "jobs/2" {
		t.Fatalf("Locks(jobs/) = %+v", got)
	}
	for _, li := range got {
		l := held[li.Key]
		if li.Owner != l.Owner() || li.Token != l.Token() || li.Age <= 0 || li.Waiters != 0 {
			t.Errorf("%+v, want owner %s token %d", li, l.Owner(), l.Token())
		}
	}
	if li, err := hb.Lock(ctx, "jobs/1"); err != nil || li.TTL <= 0 {
		t.Errorf("holder's own Lock(jobs/1) = %+v, %v; want its lease left", li, err)
	}
	if _, err := ob.Lock(ctx, "jobs/freed"); !errors.Is(err, lockx.ErrNotHeld) {
		t.Errorf("Lock of a released key: %v", err)
	}

	// A waiter is counted; ForceUnlock evicts the holder and hands the lock
	// to the waiter; the evicted holder learns it at its next renewal.
	got2 := make(chan *lockx.Lock, 1)
	go func() {
		l, err := waiter.Acquire(ctx, "jobs/1")
		if err != nil {
			t.Error(err)
		}
		got2 <- l
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		li, err := ob.Lock(ctx, "jobs/1")
		if err == nil && li.Waiters == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiter not counted: %+v, %v", li, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	evicted, err := lockx.ForceUnlock(ctx, ob, "jobs/1")
	if err != nil || evicted.Owner != held["jobs/1"].Owner() {
		t.Fatalf("ForceUnlock = %+v, %v", evicted, err)
	}
	l2 := <-got2
	if l2 == nil {
		return
	}
	if l2.Token() <= evicted.Token {
		t.Errorf("token after eviction %d not above %d", l2.Token(), evicted.Token)
	}
	if err := held["jobs/1"].Extend(ctx, time.Minute); !errors.Is(err, lockx.ErrNotHeld) {
		t.Errorf("evicted holder's Extend = %v, want ErrNotHeld", err)
	}
	_ = l2.Release(ctx)
}
