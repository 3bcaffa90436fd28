package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// With a 5 s backoff, a waiter that gets the lock within a few ms of the
// release can only have been woken by the release's notification.
func TestWakeUpLatency(t *testing.T) {
	rdb := single(t)
	prefix := testPrefix()
	for _, fair := range []bool{false, true} {
		holder := lockx.New(redislock.New(rdb, redislock.WithPrefix(prefix)))
		waiter := lockx.New(redislock.New(rdb, redislock.WithPrefix(prefix)), lockx.WithBackoff(5*time.Second, 5*time.Second))
		ctx := ctxT(t, 10*time.Second)
		var opts []lockx.Option
		if fair {
			opts = append(opts, lockx.Fair(), lockx.WithQueueTTL(30*time.Second))
		}
		l, err := holder.Acquire(ctx, "k", opts...)
		if err != nil {
			t.Fatal(err)
		}
		// the waiter has tried and sleeps by the time of the release
		d := testenv.HandOver(t, 200*time.Millisecond, func() error { return l.Release(ctx) }, func() error {
			wl, err := waiter.Acquire(ctx, "k", opts...)
			if err == nil {
				err = wl.Release(ctx)
			}
			return err
		})
		if d > time.Second {
			t.Fatalf("fair=%v: waiter got the lock %v after the release: not woken", fair, d)
		}
		t.Logf("fair=%v: waiter got the lock %v after the release", fair, d)
		_ = waiter.Close()
		_ = holder.Close()
	}
}

// A fair release wakes the head's backend only.
func TestFairWakesOnlyHead(t *testing.T) {
	rdb := single(t)
	prefix := testPrefix()
	b1 := backend(t, rdb, redislock.WithPrefix(prefix))
	b2 := backend(t, rdb, redislock.WithPrefix(prefix))
	ctx := ctxT(t, 10*time.Second)
	holder, first, second := lockx.NewOwner(), lockx.NewOwner(), lockx.NewOwner()
	mustGrant(t, b1, req("k", holder, 5*time.Second))
	w1, c1, err := b1.Watch(ctx, "k", first)
	if err != nil {
		t.Fatal(err)
	}
	defer c1()
	w2, c2, err := b2.Watch(ctx, "k", second)
	if err != nil {
		t.Fatal(err)
	}
	defer c2()
	// A subscription confirmed late (a loaded machine) wakes every watcher
	// once, by design: let those wake-ups pass before the release.
	quiesce(t, w1, w2)
	for _, r := range []driver.Request{{Key: "k", Owner: first}, {Key: "k", Owner: second}} {
		r.Lease, r.Fair, r.Wait = time.Second, true, true
		be := b1
		if r.Owner == second {
			be = b2
		}
		mustRefuse(t, be, r)
	}
	if err := b1.Release(ctx, "k", holder); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w1:
	case <-time.After(2 * time.Second):
		t.Fatal("the queue head was not woken")
	}
	select {
	case <-w2:
		t.Fatal("a waiter behind the head was woken")
	case <-time.After(200 * time.Millisecond):
	}
}

// quiesce drains the channels until none of them fires for 300 ms.
func quiesce(t *testing.T, chs ...<-chan struct{}) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, ch := range chs {
			drain(ch)
		}
		quiet := true
		for _, ch := range chs {
			select {
			case <-ch:
				quiet = false
			case <-time.After(300 * time.Millisecond / time.Duration(len(chs))):
			}
		}
		if quiet {
			return
		}
	}
	t.Fatal("watchers kept being woken with nothing released")
}

func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// Uncontended locking publishes nothing; a contended release one message.
func TestPublishOnlyWhenContended(t *testing.T) {
	rdb := single(t)
	prefix := testPrefix()
	b := backend(t, rdb, redislock.WithPrefix(prefix))
	ctx := ctxT(t, 10*time.Second)
	ps := rdb.PSubscribe(ctx, prefix+"w:*")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	for range 20 {
		o := lockx.NewOwner()
		mustGrant(t, b, req("k", o, time.Second))
		if err := b.Release(ctx, "k", o); err != nil {
			t.Fatal(err)
		}
	}
	holder, waiter := lockx.NewOwner(), lockx.NewOwner()
	mustGrant(t, b, req("k", holder, time.Second))
	r := req("k", waiter, time.Second)
	r.Wait = true
	mustRefuse(t, b, r)
	mustRefuse(t, b, r) // queues once, not per attempt
	if err := b.Release(ctx, "k", holder); err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx, "k", holder); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatal(err)
	}
	mustGrant(t, b, r)
	if err := b.Release(ctx, "k", waiter); err != nil { // the queue is empty now
		t.Fatal(err)
	}
	var msgs []string
	for {
		m, err := ps.ReceiveTimeout(ctx, 300*time.Millisecond)
		if err != nil {
			break
		}
		if msg, ok := m.(*redis.Message); ok {
			msgs = append(msgs, msg.Payload)
		}
	}
	// One handoff, "=<token>:<lease ms>:" and the waiter's wake-up.
	if len(msgs) != 1 || !strings.HasPrefix(msgs[0], "=") || !strings.HasSuffix(msgs[0], prefix+"{k}") {
		t.Fatalf("published %q, want one handoff of the key", msgs)
	}
}

// After the subscription connection is lost, every watcher is woken once it
// is back, since a release may have been published meanwhile.
func TestWakeAfterReconnect(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, DialerRetries: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	b := backend(t, rdb)
	ctx := ctxT(t, 20*time.Second)
	wake, cancel, err := b.Watch(ctx, "k", lockx.NewOwner())
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	time.Sleep(50 * time.Millisecond)
	drain(wake)
	srv.Restart(t)
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("watcher not woken after the subscription reconnected")
	}
}

func TestCloseLeavesNoGoroutine(t *testing.T) {
	rdb := single(t)
	ctx := ctxT(t, 10*time.Second)
	_ = rdb.Ping(ctx).Err()
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	b := redislock.New(rdb, redislock.WithPrefix(testPrefix()))
	// Concurrent calls, so batched: the batcher has no goroutine of its own.
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			k, o := fmt.Sprint("close:", i), lockx.NewOwner()
			if _, err := b.Acquire(ctx, req(k, o, time.Minute)); err == nil {
				_ = b.Release(ctx, k, o)
			}
		})
	}
	wg.Wait()
	_, cancel, err := b.Watch(ctx, "k", lockx.NewOwner())
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if _, _, err := b.Watch(ctx, "k", lockx.NewOwner()); err == nil {
		t.Fatal("Watch after Close succeeded")
	}
	// Closing a backend whose server is gone does not hang either.
	gone := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialerRetries: 1})
	defer gone.Close()
	b2 := redislock.New(gone, redislock.WithPrefix(testPrefix()))
	wctx, wcancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer wcancel()
	if _, c, err := b2.Watch(wctx, "k", lockx.NewOwner()); err == nil {
		c()
	}
	start := time.Now()
	_ = b2.Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close took %v", d)
	}
}

// Watch on an unreachable server returns (bounded), so Acquire reaches the
// backend and reports it unavailable instead of hanging in Watch.
func TestWatchBounded(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialerRetries: 1, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	locks := lockx.New(redislock.New(rdb))
	defer locks.Close()
	ctx := ctxT(t, 10*time.Second)
	_, err := locks.Acquire(ctx, "k", lockx.WithWait(1500*time.Millisecond))
	if !errors.Is(err, lockx.ErrNotAcquired) || !errors.Is(err, lockx.ErrUnavailable) {
		t.Fatalf("Acquire on an unreachable server = %v", err)
	}
	// Only the first second after the subscription started is spent waiting
	// for it: later waits do not pay again.
	start := time.Now()
	_, err = locks.Acquire(ctx, "k", lockx.WithWait(200*time.Millisecond))
	if !errors.Is(err, lockx.ErrNotAcquired) {
		t.Fatalf("Acquire on an unreachable server = %v", err)
	}
	if d := time.Since(start); d > 800*time.Millisecond {
		t.Fatalf("a later Acquire took %v: Watch waited for the subscription again", d)
	}
}
