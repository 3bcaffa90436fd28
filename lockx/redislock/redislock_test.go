package redislock_test

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/miniclock"
	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/redislock"
)

func TestAcquireIdempotentPerOwner(t *testing.T) {
	rdb := single(t)
	b := backend(t, rdb, redislock.WithPrefix("lockxtest:"+randHex(4)+":"))
	ctx := context.Background()
	a := lockx.NewOwner()
	tok := mustGrant(t, b, req("k", a, 200*time.Millisecond))
	// A retry (lost reply) gets the same token and a fresh lease.
	tok2 := mustGrant(t, b, req("k", a, 10*time.Second))
	if tok2 != tok {
		t.Fatalf("re-acquire by the holder: token %d, want %d", tok2, tok)
	}
	if d, err := b.TTL(ctx, "k", a); err != nil || d < 9*time.Second {
		t.Fatalf("TTL after re-acquire = %v, %v; want the new lease", d, err)
	}
	if err := b.Release(ctx, "k", a); err != nil {
		t.Fatal(err)
	}
	// A retried release finds nothing to release.
	if err := b.Release(ctx, "k", a); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("second release = %v, want ErrNotHeld", err)
	}
}

func TestWrongOwnerCannotTouch(t *testing.T) {
	b := backend(t, single(t))
	ctx := context.Background()
	a, x := lockx.NewOwner(), lockx.NewOwner()
	tok := mustGrant(t, b, req("k", a, 5*time.Second))
	if err := b.Release(ctx, "k", x); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("release by another owner = %v, want ErrNotHeld", err)
	}
	if err := b.Extend(ctx, "k", x, time.Minute); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("extend by another owner = %v, want ErrNotHeld", err)
	}
	if _, err := b.TTL(ctx, "k", x); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("TTL by another owner = %v, want ErrNotHeld", err)
	}
	// The lock is intact: same holder, same token, lease not extended.
	if d, err := b.TTL(ctx, "k", a); err != nil || d > 5*time.Second {
		t.Fatalf("holder's TTL = %v, %v", d, err)
	}
	if got := mustGrant(t, b, req("k", a, 5*time.Second)); got != tok {
		t.Fatalf("holder's token changed: %d, want %d", got, tok)
	}
	res := mustRefuse(t, b, req("k", x, time.Second))
	if res.TTL <= 4*time.Second || res.TTL > 5*time.Second {
		t.Fatalf("refusal TTL = %v, want the holder's remaining lease", res.TTL)
	}
}

func TestTokensMonotonic(t *testing.T) {
	rdb := single(t)
	prefix := testPrefix()
	b := backend(t, rdb, redislock.WithPrefix(prefix), redislock.WithTombstone(300*time.Millisecond))
	ctx := context.Background()
	lk := prefix + "{k}"
	var last lockx.Token
	next := func(what string, lease time.Duration) lockx.Token {
		t.Helper()
		o := lockx.NewOwner()
		tok := mustGrant(t, b, req("k", o, lease))
		if tok <= last {
			t.Fatalf("%s: token %d not above %d", what, tok, last)
		}
		last = tok
		return tok
	}

	// Release, then at once: the tombstone (or the clock) keeps order.
	for i := range 50 {
		tok := next("after release "+strconv.Itoa(i), time.Second)
		if err := releaseAny(ctx, rdb, b, lk); err != nil {
			t.Fatal(err)
		}
		_ = tok
	}
	// Expiry: the lease runs out, no tombstone is left.
	next("before expiry", 20*time.Millisecond)
	time.Sleep(40 * time.Millisecond)
	if n, _ := rdb.Exists(ctx, lk).Result(); n != 0 {
		t.Fatalf("lock key still exists after its lease")
	}
	next("after expiry", time.Second)
	// The key deleted (eviction, FLUSHDB, a replica that never saw it).
	rdb.Del(ctx, lk)
	next("after DEL", time.Second)

	// The tombstone window: pretend the previous grant came from a clock
	// ahead of the server's (a clock that since stepped back). Within the
	// window the next token still follows the tombstone ...
	if err := releaseAny(ctx, rdb, b, lk); err != nil {
		t.Fatal(err)
	}
	ahead := int64(last) + int64(time.Hour/time.Microsecond)
	rdb.Set(ctx, lk, tokenBytes(ahead), time.Second)
	if tok := next("within the tombstone window", time.Second); int64(tok) != ahead+1 {
		t.Fatalf("token %d, want tombstone+1 = %d", tok, ahead+1)
	}
	// ... and the tombstone expires as configured.
	if err := releaseAny(ctx, rdb, b, lk); err != nil {
		t.Fatal(err)
	}
	if v, _ := rdb.Get(ctx, lk).Result(); v != tokenBytes(ahead+1) {
		t.Fatalf("tombstone %q, want the last token alone", v)
	}
	if d, _ := rdb.PTTL(ctx, lk).Result(); d <= 0 || d > 300*time.Millisecond {
		t.Fatalf("tombstone PTTL %v, want within 300ms", d)
	}
	time.Sleep(350 * time.Millisecond)
	if n, _ := rdb.Exists(ctx, lk).Result(); n != 0 {
		t.Fatalf("tombstone outlived its window")
	}
	// Past the window only the clock counts: this is the documented
	// assumption (no clock step-back larger than the window while idle).
	o := lockx.NewOwner()
	if tok := mustGrant(t, b, req("k", o, time.Second)); int64(tok) > ahead {
		t.Fatalf("token %d after the window; expected the server clock (< %d)", tok, ahead)
	}
}

// TestTokenOverTombstone: a grant over the tombstone of the key's last
// release is one past it, without reading the server clock — however long
// ago that release was within the window — and a key without one gets the
// clock, which is past every earlier token.
func TestTokenOverTombstone(t *testing.T) {
	rdb := single(t)
	b := backend(t, rdb)
	ctx := context.Background()
	var last lockx.Token
	for i := range 5 {
		o := lockx.NewOwner()
		tok := mustGrant(t, b, req("k", o, time.Second))
		if i > 0 && tok != last+1 {
			t.Fatalf("grant %d: token %d, want the tombstone's %d + 1", i, tok, last)
		}
		last = tok
		if err := b.Release(ctx, "k", o); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // the clock moves on; the token does not follow it
	}
	sec, _ := rdb.Time(ctx).Result()
	tok := mustGrant(t, b, req("fresh", lockx.NewOwner(), time.Second))
	if us := sec.UnixMicro(); int64(tok) < us || tok <= last {
		t.Fatalf("token %d at a key without a tombstone, want the clock (≥ %d) and above %d", tok, us, last)
	}
}

// releaseAny releases lk whoever holds it, as its holder would.
func releaseAny(ctx context.Context, rdb *redis.Client, b *redislock.Backend, lk string) error {
	v, err := rdb.Get(ctx, lk).Result()
	if err != nil {
		return err
	}
	o, _ := splitLock(v)
	key := lk[len(lk)-2 : len(lk)-1] // "<prefix>{k}" → "k"
	return b.Release(ctx, key, lockx.Owner(hex.EncodeToString([]byte(o))))
}

// splitLock splits a lock value into the encoded owner and the token.
func splitLock(v string) (owner string, token int64) {
	if len(v) < 8 {
		return "", 0
	}
	return v[:len(v)-8], int64(binary.BigEndian.Uint64([]byte(v[len(v)-8:])))
}

// tokenBytes is a token as the lock value stores it.
func tokenBytes(tok int64) string {
	return string(binary.BigEndian.AppendUint64(nil, uint64(tok)))
}

func TestDataModel(t *testing.T) {
	rdb := single(t)
	prefix := testPrefix()
	b := backend(t, rdb, redislock.WithPrefix(prefix))
	ctx := context.Background()
	lk := prefix + "{order:42}"
	a, w := lockx.NewOwner(), lockx.NewOwner()
	mustGrant(t, b, req("order:42", a, 5*time.Second))
	// Uncontended: one string, the owner's 16 bytes and the token.
	if keys, _ := rdb.Keys(ctx, prefix+"*").Result(); len(keys) != 1 || keys[0] != lk {
		t.Fatalf("keys of a held lock: %v, want [%s]", keys, lk)
	}
	v, _ := rdb.Get(ctx, lk).Result()
	if o, tok := splitLock(v); hex.EncodeToString([]byte(o)) != string(a) || tok <= 0 || len(v) != 24 {
		t.Fatalf("lock value %q", v)
	}
	// A waiter, with Fair or without, queues: the queue keys appear, with an
	// expiry, and no waiter mark (marks are an older version's).
	r := req("order:42", w, time.Second)
	r.Wait, r.QueueTTL = true, 2*time.Second
	mustRefuse(t, b, r)
	for _, k := range []string{lk + ":q", lk + ":qd"} {
		if d, _ := rdb.PTTL(ctx, k).Result(); d <= 0 || d > 2*time.Second {
			t.Fatalf("PTTL(%s) = %v, want the queue TTL", k, d)
		}
	}
	if n, _ := rdb.Exists(ctx, lk+":w").Result(); n != 0 {
		t.Fatalf("a waiter left a waiter mark")
	}
	if err := b.Release(ctx, "order:42", a); err != nil {
		t.Fatal(err)
	}
	// The release wrote the lock for the waiter itself (a direct handoff).
	if v, _ := rdb.Get(ctx, lk).Result(); len(v) <= 8 || hex.EncodeToString([]byte(v[:len(v)-8])) != string(w) {
		t.Fatalf("after the release the lock is %q, want it handed to the waiter", v)
	}
	mustGrant(t, b, r) // the head takes it and leaves the queue
	if n, _ := rdb.Exists(ctx, lk+":q", lk+":qd").Result(); n != 0 {
		t.Fatalf("queue keys left after the last waiter was granted")
	}
	if err := b.Release(ctx, "order:42", w); err != nil {
		t.Fatal(err)
	}
	if v, _ := rdb.Get(ctx, lk).Result(); len(v) != 8 {
		t.Fatalf("tombstone %q, want the 8-byte token", v)
	}
}

// TestWaiterGivingUpWithdraws: without Fair a waiter still queues, so one
// that gives up must leave the queue, or the next release would hand the
// lock to an owner that no longer waits. Here the waiter's Client closes
// while it waits. (Fails with the core withdrawing fair waiters only: the
// entry stays for the queue TTL and the release hands the key to it.)
func TestWaiterGivingUpWithdraws(t *testing.T) {
	rdb := single(t)
	prefix := testPrefix()
	holder := lockx.New(backend(t, rdb, redislock.WithPrefix(prefix)), lockx.WithLease(time.Minute))
	t.Cleanup(func() { _ = holder.Close() })
	// A queue TTL longer than the test waits: only a withdrawal empties it.
	waiter := lockx.New(backend(t, rdb, redislock.WithPrefix(prefix)), lockx.WithLease(time.Minute), lockx.WithQueueTTL(time.Minute))
	ctx := ctxT(t, 30*time.Second)
	lk := prefix + "{gone}"
	held, err := holder.Acquire(ctx, "gone")
	if err != nil {
		t.Fatal(err)
	}
	gaveUp := make(chan error, 1)
	go func() {
		_, err := waiter.Acquire(ctx, "gone")
		gaveUp <- err
	}()
	queueKeys := func() int64 {
		n, err := rdb.Exists(ctx, lk+":q", lk+":qd").Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitFor := func(what string, ok func() bool) {
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal(what)
			}
		}
	}
	waitFor("the waiter never queued", func() bool { return queueKeys() == 2 })
	_ = waiter.Close()
	if err := <-gaveUp; !errors.Is(err, lockx.ErrNotAcquired) {
		t.Fatalf("a waiter whose Client closed: %v, want ErrNotAcquired", err)
	}
	// The withdrawal may finish just after Acquire returns (abandonGrace).
	waitFor("a waiter that gave up stayed in the queue", func() bool { return queueKeys() == 0 })
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if v, _ := rdb.Get(ctx, lk).Result(); len(v) != 8 {
		t.Fatalf("after the release the key is %q, want the tombstone (no one waits)", v)
	}
}

func TestFairQueue(t *testing.T) {
	b := backend(t, single(t))
	ctx := context.Background()
	fair := func(o lockx.Owner, wait bool) driver.Request {
		r := req("q", o, 5*time.Second)
		r.Fair, r.Wait, r.QueueTTL = true, wait, 5*time.Second
		return r
	}
	holder := lockx.NewOwner()
	mustGrant(t, b, req("q", holder, 5*time.Second))
	w := []lockx.Owner{lockx.NewOwner(), lockx.NewOwner(), lockx.NewOwner()}
	for _, o := range w {
		mustRefuse(t, b, fair(o, true))
	}
	// A fair try without Wait never enqueues, and is refused behind the queue.
	try := lockx.NewOwner()
	mustRefuse(t, b, fair(try, false))
	if err := b.Release(ctx, "q", holder); err != nil {
		t.Fatal(err)
	}
	// Handed to the head of the queue: a barging attempt and a non-head
	// waiter are refused.
	if res := mustRefuse(t, b, req("q", lockx.NewOwner(), time.Second)); res.TTL <= 0 {
		t.Fatalf("refusal of a key handed to the queue head: TTL %v, want > 0", res.TTL)
	}
	mustRefuse(t, b, fair(w[2], true))
	mustRefuse(t, b, fair(try, false))
	for i, o := range w {
		mustGrant(t, b, fair(o, true))
		for _, later := range w[i+1:] {
			mustRefuse(t, b, fair(later, true))
		}
		if err := b.Release(ctx, "q", o); err != nil {
			t.Fatal(err)
		}
	}
	// The queue is empty again: anyone may take the key.
	mustGrant(t, b, req("q", try, time.Second))
}

func TestFairWithdraw(t *testing.T) {
	b := backend(t, single(t))
	ctx := context.Background()
	fair := func(o lockx.Owner) driver.Request { return fairWait(o, 0) }
	holder, w1, w2 := lockx.NewOwner(), lockx.NewOwner(), lockx.NewOwner()
	mustGrant(t, b, req("q", holder, 5*time.Second))
	mustRefuse(t, b, fair(w1))
	mustRefuse(t, b, fair(w2))
	// A waiter that gives up withdraws with Release (ErrNotHeld: it held nothing).
	if err := b.Release(ctx, "q", w1); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("withdrawal = %v, want ErrNotHeld", err)
	}
	if err := b.Release(ctx, "q", holder); err != nil {
		t.Fatal(err)
	}
	mustGrant(t, b, fair(w2))
}

func TestFairCrashedWaiterDropped(t *testing.T) {
	b := backend(t, single(t))
	ctx := context.Background()
	const qttl = 300 * time.Millisecond
	fair := func(o lockx.Owner) driver.Request { return fairWait(o, qttl) }
	holder, crashed, alive := lockx.NewOwner(), lockx.NewOwner(), lockx.NewOwner()
	mustGrant(t, b, req("q", holder, 5*time.Second))
	mustRefuse(t, b, fair(crashed)) // enqueues, then never comes back
	mustRefuse(t, b, fair(alive))
	if err := b.Release(ctx, "q", holder); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for {
		res, err := b.Acquire(ctx, fair(alive)) // refreshes alive's place
		if err != nil {
			t.Fatal(err)
		}
		if res.Acquired {
			break
		}
		if time.Since(start) > 3*qttl {
			t.Fatal("a crashed fair waiter stalls the queue beyond its queue TTL")
		}
		time.Sleep(qttl / 10)
	}
	if d := time.Since(start); d < qttl*8/10 {
		t.Fatalf("granted after %v, before the crashed waiter's entry expired", d)
	}
}

// A queued fair waiter's repeated attempt (a refresh, or a retry after a
// lost reply) keeps its place: the release hands the lock to the first to
// queue, not to the last to have asked.
func TestFairRetryKeepsPlace(t *testing.T) {
	b := backend(t, single(t))
	ctx := context.Background()
	fair := func(o lockx.Owner) driver.Request { return fairWait(o, 0) }
	holder, first, second := lockx.NewOwner(), lockx.NewOwner(), lockx.NewOwner()
	mustGrant(t, b, req("q", holder, 5*time.Second))
	mustRefuse(t, b, fair(first))
	mustRefuse(t, b, fair(second))
	mustRefuse(t, b, fair(first))
	mustRefuse(t, b, fair(second))
	if err := b.Release(ctx, "q", holder); err != nil {
		t.Fatal(err)
	}
	mustRefuse(t, b, fair(second))
	mustGrant(t, b, fair(first))
}

// A release hands the lock past queue heads whose entries have expired
// (waiters that crashed) to the first live one, and drops them.
func TestHandoffSkipsExpiredHeads(t *testing.T) {
	rdb := single(t)
	prefix := testPrefix()
	b := backend(t, rdb, redislock.WithPrefix(prefix))
	ctx := context.Background()
	holder, crashed1, crashed2, alive := lockx.NewOwner(), lockx.NewOwner(), lockx.NewOwner(), lockx.NewOwner()
	mustGrant(t, b, req("q", holder, 5*time.Second))
	mustRefuse(t, b, fairWait(crashed1, 100*time.Millisecond))
	mustRefuse(t, b, fairWait(crashed2, 100*time.Millisecond))
	mustRefuse(t, b, fairWait(alive, 5*time.Second))
	time.Sleep(150 * time.Millisecond)
	if n := rdb.ZCard(ctx, prefix+"{q}:q").Val(); n != 3 {
		t.Fatalf("%d waiters queued, want 3", n)
	}
	if err := b.Release(ctx, "q", holder); err != nil {
		t.Fatal(err)
	}
	if n := rdb.ZCard(ctx, prefix+"{q}:q").Val() + rdb.HLen(ctx, prefix+"{q}:qd").Val(); n != 0 {
		t.Fatalf("%d queue entries left after the handoff, want 0", n)
	}
	mustGrant(t, b, fairWait(alive, 5*time.Second))
}

func TestExtendMany(t *testing.T) {
	b := backend(t, single(t))
	ctx := context.Background()
	a := lockx.NewOwner()
	mustGrant(t, b, req("x", a, time.Second))
	mustGrant(t, b, req("y", a, time.Second))
	errs := b.ExtendMany(ctx, []driver.ExtendRequest{
		{Key: "x", Owner: a, Lease: time.Minute},
		{Key: "y", Owner: lockx.NewOwner(), Lease: time.Minute},
		{Key: "z", Owner: a, Lease: time.Minute},
	})
	if len(errs) != 3 || errs[0] != nil || !errors.Is(errs[1], lockx.ErrNotHeld) || !errors.Is(errs[2], lockx.ErrNotHeld) {
		t.Fatalf("ExtendMany = %v", errs)
	}
	if d, _ := b.TTL(ctx, "x", a); d < 50*time.Second {
		t.Fatalf("x not extended: %v", d)
	}
	if d, _ := b.TTL(ctx, "y", a); d > time.Second {
		t.Fatalf("y extended by a stranger: %v", d)
	}
}

func TestBracesInKeysOnCluster(t *testing.T) {
	c := testenv.SharedCluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs})
	t.Cleanup(func() { _ = rdb.Close() })
	b := backend(t, rdb)
	ctx := ctxT(t, 20*time.Second)
	keys := []string{"plain", "{a}", "a}b", "}", "}x", "{", "{}", "x{}y", "{{x}}", "a{b}c{d}", "}{", "日本{語}"}
	for _, k := range keys {
		holder, waiter := lockx.NewOwner(), lockx.NewOwner()
		mustGrant(t, b, req(k, holder, 5*time.Second))
		// A fair waiter touches all three keys of the lock in one script:
		// CROSSSLOT would fail it.
		r := req(k, waiter, 5*time.Second)
		r.Fair, r.Wait = true, true
		mustRefuse(t, b, r)
		wake, cancel, err := b.Watch(ctx, k, waiter)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Release(ctx, k, holder); err != nil {
			t.Fatalf("key %q: release: %v", k, err)
		}
		select {
		case <-wake:
		case <-time.After(2 * time.Second):
			t.Fatalf("key %q: fair waiter not woken", k)
		}
		cancel()
		mustGrant(t, b, r)
		if errs := b.ExtendMany(ctx, []driver.ExtendRequest{{Key: k, Owner: waiter, Lease: time.Second}}); errs[0] != nil {
			t.Fatalf("key %q: ExtendMany: %v", k, errs[0])
		}
		if err := b.Release(ctx, k, waiter); err != nil {
			t.Fatalf("key %q: release: %v", k, err)
		}
	}
	// Distinct keys never share a lock, whatever their braces.
	owners := make([]lockx.Owner, len(keys))
	for i, k := range keys {
		owners[i] = lockx.NewOwner()
		mustGrant(t, b, req(k, owners[i], 5*time.Second))
	}
	for i, k := range keys {
		if err := b.Release(ctx, k, owners[i]); err != nil {
			t.Fatalf("key %q: %v", k, err)
		}
	}
}

func TestNoScriptRecovery(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := clientAt(t, srv.Addr)
	b := backend(t, rdb)
	ctx := ctxT(t, 10*time.Second)
	a := lockx.NewOwner()
	for round := range 2 {
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		mustGrant(t, b, req("k", a, time.Second))
		rdb.ScriptFlush(ctx)
		if errs := b.ExtendMany(ctx, []driver.ExtendRequest{{Key: "k", Owner: a, Lease: time.Second}}); errs[0] != nil {
			t.Fatalf("round %d: ExtendMany after SCRIPT FLUSH: %v", round, errs[0])
		}
		rdb.ScriptFlush(ctx)
		if err := b.Extend(ctx, "k", a, time.Second); err != nil {
			t.Fatalf("round %d: Extend after SCRIPT FLUSH: %v", round, err)
		}
		rdb.ScriptFlush(ctx)
		if _, err := b.TTL(ctx, "k", a); err != nil {
			t.Fatalf("round %d: TTL after SCRIPT FLUSH: %v", round, err)
		}
		rdb.ScriptFlush(ctx)
		if err := b.Release(ctx, "k", a); err != nil {
			t.Fatalf("round %d: Release after SCRIPT FLUSH: %v", round, err)
		}
	}
}

func TestUnavailable(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond, DialerRetries: 1})
	t.Cleanup(func() { _ = rdb.Close() })
	b := backend(t, rdb)
	ctx := ctxT(t, 10*time.Second)
	a := lockx.NewOwner()
	mustGrant(t, b, req("k", a, time.Second))
	srv.Stop()
	_, err := b.Acquire(ctx, req("k", lockx.NewOwner(), time.Second))
	checkUnavailable(t, "Acquire", err)
	checkUnavailable(t, "Extend", b.Extend(ctx, "k", a, time.Second))
	checkUnavailable(t, "Release", b.Release(ctx, "k", a))
	_, err = b.TTL(ctx, "k", a)
	checkUnavailable(t, "TTL", err)
	checkUnavailable(t, "ExtendMany", b.ExtendMany(ctx, []driver.ExtendRequest{{Key: "k", Owner: a, Lease: time.Second}})[0])

	// Through the client: fail closed, quickly.
	locks := lockx.New(b)
	defer locks.Close()
	start := time.Now()
	_, err = locks.TryAcquire(ctx, "k")
	if !errors.Is(err, lockx.ErrUnavailable) || time.Since(start) > 2*time.Second {
		t.Fatalf("TryAcquire on a stopped server = %v after %v, want ErrUnavailable at once", err, time.Since(start))
	}
	// Context errors stay visible.
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Acquire(cctx, req("k", a, time.Second)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with a cancelled context = %v", err)
	}
}

func checkUnavailable(t *testing.T, op string, err error) {
	t.Helper()
	if !errors.Is(err, lockx.ErrUnavailable) {
		t.Fatalf("%s on a stopped server = %v, want ErrUnavailable", op, err)
	}
}

func TestReplicaAck(t *testing.T) {
	master := testenv.StartRedis(t)
	replica := testenv.StartRedis(t, "--replicaof", "127.0.0.1 "+strconv.Itoa(master.Port))
	rdb := clientAt(t, master.Addr)
	ctx := ctxT(t, 20*time.Second)
	waitOnline(t, ctx, rdb)
	b := backend(t, rdb, redislock.WithReplicaAck(1, 500*time.Millisecond))
	a := lockx.NewOwner()
	rdb.ScriptFlush(ctx) // the pipelined path recovers from NOSCRIPT too
	if res, err := b.Acquire(ctx, req("k", a, 5*time.Second)); err != nil || !res.Acquired {
		info, _ := rdb.Info(ctx, "replication").Result()
		t.Fatalf("Acquire = %+v, %v\n%s", res, err, info)
	}
	if err := b.Release(ctx, "k", a); err != nil {
		t.Fatal(err)
	}

	replica.Stop()
	start := time.Now()
	res, err := b.Acquire(ctx, req("k", a, 5*time.Second))
	if !errors.Is(err, lockx.ErrUnavailable) || res.Acquired {
		t.Fatalf("Acquire without a replica = %+v, %v; want ErrUnavailable", res, err)
	}
	if d := time.Since(start); d < 450*time.Millisecond {
		t.Fatalf("failed after %v, before the ack timeout", d)
	}
	// The unacknowledged grant was taken back.
	if _, err := backend(t, rdb).TTL(ctx, "k", a); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("an unacknowledged grant is still held: %v", err)
	}
}

// waitOnline waits until master counts a replica as online and has had an
// acknowledgement from it: only then does WAIT count the replica (a replica
// put online may still be loading the snapshot, acknowledging nothing).
func waitOnline(t *testing.T, ctx context.Context, master *redis.Client) {
	t.Helper()
	for {
		info, _ := master.Info(ctx, "replication").Result()
		if strings.Contains(info, ",state=online,") && !strings.Contains(info, ",offset=0,") {
			return
		}
		if ctx.Err() != nil {
			t.Fatal("replica never came online")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestInvalidOptions(t *testing.T) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	for name, b := range map[string]*redislock.Backend{
		"brace prefix": redislock.New(rdb, redislock.WithPrefix("a{b")),
		"nil client":   redislock.New(nil),
		"ack timeout":  redislock.New(rdb, redislock.WithReplicaAck(1, 0)),
	} {
		_, err := b.Acquire(ctx, req("k", lockx.NewOwner(), time.Second))
		if !errors.Is(err, lockx.ErrInvalidArgument) {
			t.Errorf("%s: Acquire = %v, want ErrInvalidArgument", name, err)
		}
		if _, _, err := b.Watch(ctx, "k", "o"); !errors.Is(err, lockx.ErrInvalidArgument) {
			t.Errorf("%s: Watch = %v, want ErrInvalidArgument", name, err)
		}
		_ = b.Close()
	}
}

// A fair queue's keys live at least two thirds of the longest queue TTL
// asked for past the last attempt: a waiter with a shorter TTL never
// shortens them, a waiter that finds more than two thirds left leaves them
// (no write), and one that finds less extends them to its TTL. Run on
// Redis (the function library) and on miniredis (the EVAL scripts).
func TestQueueTTLKeptLongest(t *testing.T) {
	m := miniredis.RunT(t)
	t.Cleanup(miniclock.Follow(m))
	mini := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = mini.Close() })
	for name, rdb := range map[string]*redis.Client{"redis": single(t), "miniredis": mini} {
		t.Run(name, func(t *testing.T) {
			prefix := testPrefix()
			b := backend(t, rdb, redislock.WithPrefix(prefix))
			ctx := context.Background()
			lk := prefix + "{k}"
			mustGrant(t, b, req("k", lockx.NewOwner(), 10*time.Second))
			wait := func(qttl time.Duration) {
				t.Helper()
				r := req("k", lockx.NewOwner(), time.Second)
				r.Wait, r.QueueTTL = true, qttl
				mustRefuse(t, b, r)
			}
			ttls := func() (q, d time.Duration) {
				return rdb.PTTL(ctx, lk+":q").Val(), rdb.PTTL(ctx, lk+":qd").Val()
			}
			const qttl = 900 * time.Millisecond
			wait(qttl)
			q0, d0 := ttls()
			if q0 <= 600*time.Millisecond || q0 > qttl || d0 <= 600*time.Millisecond || d0 > qttl {
				t.Fatalf("a new queue's TTLs %v, %v; want about %v", q0, d0, qttl)
			}
			wait(150 * time.Millisecond)
			if q, d := ttls(); q <= 300*time.Millisecond || d <= 300*time.Millisecond {
				t.Fatalf("a waiter with a 150ms queue TTL shortened the queue to %v, %v", q, d)
			}
			time.Sleep(20 * time.Millisecond)
			mid, _ := ttls()
			wait(qttl)
			if q, _ := ttls(); mid > 2*qttl/3 && q > mid {
				t.Fatalf("a waiter extended a queue with %v of %v left: %v", mid, qttl, q)
			}
			time.Sleep(400 * time.Millisecond)
			before, _ := ttls()
			wait(qttl)
			if q, d := ttls(); q <= before || d <= before {
				t.Fatalf("a later waiter did not extend the queue: %v, %v (was %v)", q, d, before)
			}
		})
	}
}
