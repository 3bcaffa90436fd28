package redislock_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// countHook counts the commands and pipelines a client sends.
type countHook struct{ n atomic.Int64 }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

func fairReq(key string, owner lockx.Owner, lease time.Duration) driver.Request {
	return driver.Request{Key: key, Owner: owner, Lease: lease, Fair: true, Wait: true}
}

// handoffSetup returns a holder backend, a waiter backend over its own
// counted client, the shared prefix and a pub/sub of every wake-up channel.
func handoffSetup(t *testing.T) (holder, waiter *redislock.Backend, hook *countHook, msgs <-chan *redis.Message) {
	t.Helper()
	prefix := testPrefix()
	rdb := single(t)
	wrdb := clientAt(t, testenv.RedisAddr(t))
	hook = &countHook{}
	wrdb.AddHook(hook)
	holder = backend(t, rdb, redislock.WithPrefix(prefix))
	waiter = backend(t, wrdb, redislock.WithPrefix(prefix))
	ps := rdb.PSubscribe(ctxT(t, 10*time.Second), prefix+"w:*")
	t.Cleanup(func() { _ = ps.Close() })
	if _, err := ps.Receive(ctxT(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	return holder, waiter, hook, ps.Channel()
}

func TestFairHandoffGrantsHeadWithoutRoundTrip(t *testing.T) {
	holder, waiter, hook, msgs := handoffSetup(t)
	ctx := ctxT(t, 10*time.Second)
	const key, lease = "handoff", 2 * time.Second
	prev := mustGrant(t, holder, fairReq(key, "holder", lease))

	wake, cancel, err := waiter.Watch(ctx, key, "head")
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	mustRefuse(t, waiter, fairReq(key, "head", lease))
	refusedBy := time.Now() // the refused attempt was sent before this

	if err := holder.Release(ctx, key, "holder"); err != nil {
		t.Fatal(err)
	}
	var msg *redis.Message
	select {
	case msg = <-msgs:
	case <-ctx.Done():
		t.Fatal("no wake-up message")
	}
	select {
	case <-wake:
	case <-ctx.Done():
		t.Fatal("head not woken")
	}
	// One message, carrying the token: "=<token>:<lease ms>:<owner msg>".
	if !strings.HasPrefix(msg.Payload, "=") {
		t.Fatalf("wake-up %q is not a handoff", msg.Payload)
	}
	tokStr, _, _ := strings.Cut(msg.Payload[1:], ":")
	sent, err := strconv.ParseInt(tokStr, 10, 64)
	if err != nil {
		t.Fatalf("handoff %q: %v", msg.Payload, err)
	}
	select {
	case m := <-msgs:
		t.Fatalf("second message %q for one handoff", m.Payload)
	case <-time.After(50 * time.Millisecond):
	}

	before := hook.n.Load()
	start := time.Now()
	res, err := waiter.Acquire(ctx, fairReq(key, "head", lease))
	if err != nil || !res.Acquired {
		t.Fatalf("head's Acquire after handoff = %+v, %v", res, err)
	}
	if n := hook.n.Load() - before; n != 0 {
		t.Errorf("head's Acquire after handoff cost %d round trips, want 0", n)
	}
	if res.Token <= prev || int64(res.Token) != sent {
		t.Errorf("token %d: want the message's %d, above the previous %d", res.Token, sent, prev)
	}
	if bound := lease - start.Sub(refusedBy); res.TTL > bound || res.TTL <= 0 {
		t.Errorf("TTL %v, want in (0, %v]", res.TTL, bound)
	}
	// The grant is on the server, and a retry is idempotent.
	if ttl, err := waiter.TTL(ctx, key, "head"); err != nil || ttl <= 0 || ttl > lease {
		t.Errorf("server TTL = %v, %v", ttl, err)
	}
	if tok := mustGrant(t, waiter, fairReq(key, "head", lease)); tok != res.Token {
		t.Errorf("retry token %d, want %d", tok, res.Token)
	}
	if err := waiter.Release(ctx, key, "head"); err != nil {
		t.Fatal(err)
	}
	if tok := mustGrant(t, holder, req(key, "other", lease)); tok <= res.Token {
		t.Errorf("next token %d not above %d", tok, res.Token)
	}
}

func TestFairHandoffWithdrawnHeadLeavesNoLock(t *testing.T) {
	holder, waiter, hook, _ := handoffSetup(t)
	ctx := ctxT(t, 10*time.Second)
	const key, lease = "withdrawn", 5 * time.Second
	mustGrant(t, holder, fairReq(key, "holder", lease))
	_, cancel, err := waiter.Watch(ctx, key, "head")
	if err != nil {
		t.Fatal(err)
	}
	mustRefuse(t, waiter, fairReq(key, "head", lease))
	mustRefuse(t, holder, fairReq(key, "second", lease))
	// The holder releases; the head gives up before it reads the handoff:
	// its withdrawal (Release) frees the lock it was handed, which goes on
	// to the next in line.
	if err := holder.Release(ctx, key, "holder"); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := waiter.Release(ctx, key, "head"); err != nil {
		t.Errorf("withdrawal of a handed-off head = %v, want the release of its lock", err)
	}
	if _, err := waiter.TTL(ctx, key, "head"); err != lockx.ErrNotHeld {
		t.Errorf("withdrawn head still holds the lock: %v", err)
	}
	if tok := mustGrant(t, holder, fairReq(key, "second", lease)); tok <= 0 {
		t.Fatal("second waiter not granted")
	}
	// No record survives: the head's next attempt goes to the server.
	before := hook.n.Load()
	mustRefuse(t, waiter, driver.Request{Key: key, Owner: "head", Lease: lease, Fair: true})
	if hook.n.Load() == before {
		t.Error("attempt after withdrawal answered from a stale record")
	}
}

// TestFairHandoffCrashedHead: a head that crashed after its last attempt is
// handed the lock all the same, with the lease it asked for capped at its
// queue TTL, and holds the key that long; then the queue moves on.
func TestFairHandoffCrashedHead(t *testing.T) {
	holder, waiter, _, _ := handoffSetup(t)
	ctx := ctxT(t, 10*time.Second)
	const key, lease = "crashed", 400 * time.Millisecond
	mustGrant(t, holder, fairReq(key, "holder", lease))
	mustRefuse(t, waiter, fairReq(key, "crashed", lease))
	mustRefuse(t, holder, fairReq(key, "next", 5*time.Second))
	if err := holder.Release(ctx, key, "holder"); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	if ttl, err := waiter.TTL(ctx, key, "crashed"); err != nil || ttl <= 0 || ttl > lease {
		t.Fatalf("crashed head's handed-off lock: %v, %v", ttl, err)
	}
	d := pollGrant(t, released, lease+2*time.Second, "queue stuck behind a crashed head", func() (driver.Result, error) {
		return holder.Acquire(ctx, fairReq(key, "next", 5*time.Second))
	})
	if d > lease+time.Second {
		t.Errorf("next waiter granted %v after the release, lease %v", d, lease)
	}
}

// pollGrant makes attempts with try until one is granted, pausing after a
// refusal until the holder's lease ends (50 ms at most), and returns how
// long after from the grant came. It fails t if none came within giveUp.
func pollGrant(t *testing.T, from time.Time, giveUp time.Duration, stuck string, try func() (driver.Result, error)) time.Duration {
	t.Helper()
	for {
		res, err := try()
		if err != nil {
			t.Fatal(err)
		}
		if res.Acquired {
			return time.Since(from)
		}
		if time.Since(from) > giveUp {
			t.Fatal(stuck)
		}
		time.Sleep(min(res.TTL+time.Millisecond, 50*time.Millisecond))
	}
}

// TestFairHandoffThroughClient runs fair waiters through the core: every
// acquisition is exclusive and in order, and handoffs leave nothing behind.
func TestFairHandoffThroughClient(t *testing.T) {
	prefix := testPrefix()
	rdb := single(t)
	ctx := ctxT(t, 20*time.Second)
	var inside atomic.Int32
	var last atomic.Int64
	done := make(chan error, 4)
	for range 4 {
		// One client each: a client queues its own goroutines locally.
		c := lockx.New(backend(t, rdb, redislock.WithPrefix(prefix)))
		t.Cleanup(func() { _ = c.Close() })
		go func() {
			for range 20 {
				l, err := c.Acquire(ctx, "client", lockx.Fair())
				if err != nil {
					done <- err
					return
				}
				if inside.Add(1) != 1 {
					t.Error("two holders")
				}
				if tok := int64(l.Token()); tok <= last.Load() {
					t.Errorf("token %d not above %d", tok, last.Load())
				} else {
					last.Store(tok)
				}
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				if err := l.Release(ctx); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range 4 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// A holder that will not renew (no watchdog) and asked for a lease longer
// than the queue TTL gets its full lease: the capped handoff is not used and
// the next attempt re-grants on the server with the lease it asked for.
func TestFairHandoffFullLeaseWithoutRenewal(t *testing.T) {
	holder, waiter, hook, msgs := handoffSetup(t)
	ctx := ctxT(t, 10*time.Second)
	const key = "handoff-full"
	long := fairReq(key, "head", 20*time.Second)
	long.QueueTTL = time.Second // the handoff lease is capped at this
	mustGrant(t, holder, fairReq(key, "holder", 2*time.Second))
	wake, cancel, err := waiter.Watch(ctx, key, "head")
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	mustRefuse(t, waiter, long)
	if err := holder.Release(ctx, key, "holder"); err != nil {
		t.Fatal(err)
	}
	<-msgs
	<-wake
	before := hook.n.Load()
	res, err := waiter.Acquire(ctx, long)
	if err != nil || !res.Acquired {
		t.Fatalf("Acquire = %+v, %v", res, err)
	}
	if hook.n.Load() == before {
		t.Error("answered from the capped handoff without a round trip")
	}
	if ttl, err := waiter.TTL(ctx, key, "head"); err != nil || ttl <= 10*time.Second {
		t.Errorf("server TTL = %v, %v; want the full 20 s lease", ttl, err)
	}
	_ = waiter.Release(ctx, key, "head")
}

// A waiter of a Client whose subscription is up is queued by its first
// attempt and waits without a second one (driver.Result.Queued): handed the
// lock by the release, it has made one round trip in all.
func TestQueuedWaiterOneRoundTrip(t *testing.T) {
	addr := testenv.RedisAddr(t)
	prefix := testPrefix()
	hrdb := redis.NewClient(&redis.Options{Addr: addr})
	wrdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = hrdb.Close(); _ = wrdb.Close() })
	hook := &countHook{}
	wrdb.AddHook(hook)
	wb := redislock.New(wrdb, redislock.WithPrefix(prefix))
	hc, wc := lockx.New(redislock.New(hrdb, redislock.WithPrefix(prefix))), lockx.New(wb)
	t.Cleanup(func() { _ = hc.Close(); _ = wc.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Start the waiter's subscription, and load the scripts.
	_, stop, err := wb.Watch(ctx, "warm", lockx.NewOwner())
	if err != nil {
		t.Fatal(err)
	}
	stop()
	for _, c := range []*lockx.Client{hc, wc} {
		if l, err := c.Acquire(ctx, "warm"); err != nil || l.Release(ctx) != nil {
			t.Fatal("warm-up:", err)
		}
	}
	for range 3 {
		held, err := hc.Acquire(ctx, "k", lockx.WithLease(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		base := hook.n.Load()
		got := make(chan error, 1)
		var trips int64
		go func() {
			l, err := wc.Acquire(ctx, "k", lockx.WithLease(5*time.Second))
			trips = hook.n.Load() - base
			if err == nil {
				err = l.Release(ctx)
			}
			got <- err
		}()
		for !redislock.Watching(wb, "k") {
			if ctx.Err() != nil {
				t.Fatal("the waiter never watched")
			}
			time.Sleep(time.Millisecond)
		}
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		if trips != 1 {
			t.Fatalf("the waiter made %d round trips until its grant, want 1 (its queueing attempt)", trips)
		}
	}
}
