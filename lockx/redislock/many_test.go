package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// manyReqs returns n plain requests of owner for keys stem:0 … stem:n-1.
func manyReqs(stem string, n int, owner lockx.Owner, lease time.Duration) []driver.Request {
	rs := make([]driver.Request, n)
	for i := range rs {
		rs[i] = req(fmt.Sprintf("%s:%d", stem, i), owner, lease)
	}
	return rs
}

func acquireMany(t *testing.T, b *redislock.Backend, reqs []driver.Request) []driver.Result {
	t.Helper()
	res, err := b.AcquireMany(ctxT(t, 5*time.Second), reqs)
	if err != nil {
		t.Fatalf("AcquireMany: %v", err)
	}
	if len(res) != len(reqs) {
		t.Fatalf("AcquireMany: %d results for %d requests", len(res), len(reqs))
	}
	return res
}

// expectManyFree checks that another owner can take (and then gives back)
// every key of reqs.
func expectManyFree(t *testing.T, b *redislock.Backend, reqs []driver.Request) {
	t.Helper()
	o := lockx.NewOwner()
	for _, r := range reqs {
		mustGrant(t, b, req(r.Key, o, time.Second))
		if err := b.Release(context.Background(), r.Key, o); err != nil {
			t.Fatal(err)
		}
	}
}

// testManyBackend checks AcquireMany's contract on b: a grant of every key
// with a token each (held against other owners, re-granted with the same
// tokens to its owner), and a refused set that leaves nothing held.
func testManyBackend(t *testing.T, b *redislock.Backend) {
	ctx := ctxT(t, 10*time.Second)
	a, x := lockx.NewOwner(), lockx.NewOwner()
	reqs := manyReqs("set", 10, a, 5*time.Second)
	res := acquireMany(t, b, reqs)
	for i, r := range res {
		if !r.Acquired || r.Token <= 0 || r.Token > lockx.MaxToken || r.TTL != reqs[i].Lease {
			t.Fatalf("result %d = %+v, want a grant with a token and the lease", i, r)
		}
		mustRefuse(t, b, req(reqs[i].Key, x, time.Second))
	}
	// Idempotent per owner: the same tokens again.
	for i, r := range acquireMany(t, b, reqs) {
		if !r.Acquired || r.Token != res[i].Token {
			t.Fatalf("re-acquire %d = %+v, want token %d", i, r, res[i].Token)
		}
	}
	for _, r := range reqs {
		if err := b.Release(ctx, r.Key, a); err != nil {
			t.Fatal(err)
		}
	}

	// One member held by another owner: nothing is granted, the refused key
	// reports the holder's lease, and the rest stays free.
	held := reqs[7].Key
	mustGrant(t, b, req(held, x, 3*time.Second))
	res = acquireMany(t, b, reqs)
	for i, r := range res {
		if r.Acquired {
			t.Fatalf("result %d granted although %q is held", i, held)
		}
	}
	if ttl := res[7].TTL; ttl <= 2*time.Second || ttl > 3*time.Second {
		t.Fatalf("refused member's TTL = %v, want the holder's remaining lease", ttl)
	}
	if err := b.Release(ctx, held, x); err != nil {
		t.Fatal(err)
	}
	expectManyFree(t, b, reqs)

	// Later tokens are larger, per key.
	res2 := acquireMany(t, b, reqs)
	for i, r := range res2 {
		if !r.Acquired || r.Token <= res[i].Token && res[i].Token != 0 {
			t.Fatalf("result %d = %+v after a release", i, r)
		}
	}
	for _, r := range reqs {
		if err := b.Release(ctx, r.Key, a); err != nil {
			t.Fatal(err)
		}
	}

	// Each key gets its own lease when they differ (one lease for every
	// key travels as one argument).
	mixed := manyReqs("leases", 4, a, 0)
	for i := range mixed {
		mixed[i].Lease = time.Duration(i+1) * 10 * time.Second
	}
	acquireMany(t, b, mixed)
	for _, r := range mixed {
		ttl, err := b.TTL(ctx, r.Key, a)
		if err != nil || ttl <= r.Lease-5*time.Second || ttl > r.Lease {
			t.Fatalf("%s: TTL %v (%v), want its own lease %v", r.Key, ttl, err, r.Lease)
		}
		if err := b.Release(ctx, r.Key, a); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAcquireManySingle(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint("autopipeline=", on), func(t *testing.T) {
			testManyBackend(t, backend(t, single(t), redislock.WithAutoPipeline(on)))
		})
	}
}

// TestAcquireManyCluster: keys on several nodes; a refusal on one node
// gives back what the others granted.
func TestAcquireManyCluster(t *testing.T) {
	testManyBackend(t, backend(t, clusterClient(t)))
}

// TestAcquireManyOneRoundTrip counts the commands AcquireMany sends: one
// script call for a whole set on a single node.
func TestAcquireManyOneRoundTrip(t *testing.T) {
	rdb := single(t)
	hook := &countHook{}
	rdb.AddHook(hook)
	b := backend(t, rdb)
	a := lockx.NewOwner()
	reqs := manyReqs("rt", 10, a, 5*time.Second)
	acquireMany(t, b, manyReqs("warm", 1, a, time.Second)) // loads the script
	before := hook.n.Load()
	for _, r := range acquireMany(t, b, reqs) {
		if !r.Acquired {
			t.Fatalf("not granted: %+v", r)
		}
	}
	if n := hook.n.Load() - before; n != 1 {
		t.Fatalf("AcquireMany of 10 keys sent %d commands, want 1", n)
	}
}

// TestAcquireManySharedTagOneScript: on a Cluster, keys whose names share a
// hash tag go to one script; a refusal among them leaves nothing held.
func TestAcquireManySharedTagOneScript(t *testing.T) {
	b := backend(t, clusterClient(t))
	a, x := lockx.NewOwner(), lockx.NewOwner()
	tag := "{order:" + randHex(4) + "}"
	reqs := []driver.Request{req(tag+":pay", a, 5*time.Second), req(tag+":ship", a, 5*time.Second), req("other:"+randHex(4), a, 5*time.Second)}
	mustGrant(t, b, req(tag+":ship", x, 5*time.Second))
	for i, r := range acquireMany(t, b, reqs) {
		if r.Acquired {
			t.Fatalf("result %d granted although %q is held", i, tag+":ship")
		}
	}
	if err := b.Release(context.Background(), tag+":ship", x); err != nil {
		t.Fatal(err)
	}
	expectManyFree(t, b, reqs)
}

// TestAcquireManyFairHeadFirst: a free key whose fair queue has a live head
// is kept for that head, so the set is refused.
func TestAcquireManyFairHeadFirst(t *testing.T) {
	b := backend(t, single(t))
	h, w, a := lockx.NewOwner(), lockx.NewOwner(), lockx.NewOwner()
	mustGrant(t, b, req("q", h, 50*time.Millisecond))
	fw := req("q", w, time.Second)
	fw.Fair, fw.Wait, fw.QueueTTL = true, true, 5*time.Second
	mustRefuse(t, b, fw)
	time.Sleep(100 * time.Millisecond) // the holder's lease runs out, w stays queued
	reqs := []driver.Request{req("p", a, time.Second), req("q", a, time.Second)}
	for i, r := range acquireMany(t, b, reqs) {
		if r.Acquired {
			t.Fatalf("result %d granted past a live fair-queue head", i)
		}
	}
	expectManyFree(t, b, reqs[:1])
	if err := b.Release(context.Background(), "q", w); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("withdrawing the waiter = %v, want ErrNotHeld", err)
	}
}

func TestAcquireManyBadInput(t *testing.T) {
	b := backend(t, single(t))
	ctx := ctxT(t, 5*time.Second)
	a, x := lockx.NewOwner(), lockx.NewOwner()
	fair := req("f", a, time.Second)
	fair.Fair = true
	for name, reqs := range map[string][]driver.Request{
		"two owners": {req("a", a, time.Second), req("b", x, time.Second)},
		"fair":       {req("a", a, time.Second), fair},
	} {
		var ae *lockx.ArgError
		if _, err := b.AcquireMany(ctx, reqs); !errors.As(err, &ae) {
			t.Errorf("%s: %v, want *lockx.ArgError", name, err)
		}
	}
	if res, err := b.AcquireMany(ctx, nil); err != nil || len(res) != 0 {
		t.Fatalf("no requests: %v, %v", res, err)
	}
	bad := redislock.New(nil)
	if _, err := bad.AcquireMany(ctx, []driver.Request{req("a", a, time.Second)}); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Fatalf("nil client: %v, want ErrInvalidArgument", err)
	}
}

// TestAcquireManyUnavailable: a server that cannot be reached is an unknown
// outcome (ErrUnavailable), never a refusal.
func TestAcquireManyUnavailable(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	b := backend(t, rdb)
	_, err := b.AcquireMany(ctxT(t, 5*time.Second), manyReqs("u", 3, lockx.NewOwner(), time.Second))
	if !errors.Is(err, lockx.ErrUnavailable) {
		t.Fatalf("AcquireMany against a closed port = %v, want ErrUnavailable", err)
	}
}

// TestAcquireManyReplicaAckDeclines: with WithReplicaAck the set is not
// attempted in one call (the Client takes the keys one by one, each
// acknowledged), and nothing is sent.
func TestAcquireManyReplicaAckDeclines(t *testing.T) {
	rdb := single(t)
	hook := &countHook{}
	rdb.AddHook(hook)
	b := backend(t, rdb, redislock.WithReplicaAck(1, time.Second))
	res := acquireMany(t, b, manyReqs("r", 3, lockx.NewOwner(), time.Second))
	for i, r := range res {
		if r.Acquired || r.TTL != 0 {
			t.Fatalf("result %d = %+v, want a plain refusal", i, r)
		}
	}
	if n := hook.n.Load(); n != 0 {
		t.Fatalf("%d commands sent, want none", n)
	}
}

// liveQueueAtTombstone reports, atomically, what acquire_many.lua relies on
// when it skips the queue check at a key with a tombstone: 1 if the lock
// KEYS[1] is a tombstone (a token alone) while its fair queue has a live
// entry (deadline after now, as queue_head reads it), 2 for a tombstone
// with no live queue, 3 for a held lock with a live queue, 0 otherwise.
var liveQueueAtTombstone = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local live = false
for _, m in ipairs(redis.call('ZRANGE', KEYS[1] .. ':q', 0, -1)) do
  local e = redis.call('HGET', KEYS[1] .. ':qd', m)
  if e and tonumber(string.match(e, '^%d+')) > now_ms then live = true end
end
if v and #v == 8 then
  if live then return 1 end
  return 2
end
if v and live then return 3 end
return 0`)

// TestTombstoneMeansNoLiveQueue checks that invariant under load: queued
// waiters (some giving up after a few milliseconds, which withdraws them
// from the queue) and tries that never queue on one key, through Clients of
// their own, while a checker samples the key. It must see both tombstones and live
// queues, and never the two together.
func TestTombstoneMeansNoLiveQueue(t *testing.T) {
	prefix := testPrefix()
	rdb := single(t)
	ctx := ctxT(t, 30*time.Second)
	lk := prefix + "{inv}"
	stop := make(chan struct{})
	var seen [4]int
	checked := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				checked <- nil
				return
			default:
			}
			n, err := liveQueueAtTombstone.Run(ctx, rdb, []string{lk}).Int()
			if err != nil {
				checked <- err
				return
			}
			seen[n]++
			if n == 1 {
				checked <- errors.New("a tombstone coexisted with a live fair queue")
				return
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()
	done := make(chan error, 6)
	for i := range 6 {
		c := lockx.New(backend(t, rdb, redislock.WithPrefix(prefix)))
		t.Cleanup(func() { _ = c.Close() })
		go func() {
			for j := range 60 {
				opts := []lockx.Option{lockx.WithLease(time.Second)}
				if i < 4 {
					opts = append(opts, lockx.Fair())
				}
				if j%3 == 0 {
					opts = append(opts, lockx.WithWait(2*time.Millisecond))
				}
				acquire := c.Acquire
				if i >= 2 {
					acquire = c.TryAcquire
				}
				l, err := acquire(ctx, "inv", opts...)
				if errors.Is(err, lockx.ErrNotAcquired) {
					continue // gave up (a waiter withdrew from the queue) or refused a try
				}
				if err != nil {
					done <- err
					return
				}
				time.Sleep(time.Duration(j%3) * time.Millisecond)
				if err := l.Release(ctx); err != nil {
					done <- err
					return
				}
				if j%4 == 0 {
					time.Sleep(3 * time.Millisecond) // let the key fall free now and then
				}
			}
			done <- nil
		}()
	}
	for range 6 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case err := <-checked: // the checker ends early only on a failure
			t.Fatal(err)
		}
	}
	close(stop)
	if err := <-checked; err != nil {
		t.Fatal(err)
	}
	t.Logf("samples: tombstone %d, held with live queue %d, other %d", seen[2], seen[3], seen[0])
	if seen[2] == 0 || seen[3] == 0 {
		t.Fatalf("the run never showed both a tombstone (%d samples) and a live queue (%d): it checked nothing", seen[2], seen[3])
	}
}
