package redislock_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// permitReq is a fair waiting attempt at count of limit permits of key.
func permitReq(key string, owner lockx.Owner, lease time.Duration, limit, count int64) driver.PermitRequest {
	return driver.PermitRequest{Request: fairReq(key, owner, lease), Limit: limit, Count: count}
}

func mustPermits(t testing.TB, b *redislock.Backend, r driver.PermitRequest) lockx.Token {
	t.Helper()
	res, err := b.AcquirePermits(context.Background(), r)
	if err != nil || !res.Acquired {
		t.Fatalf("AcquirePermits(%q, %s) = %+v, %v; want a grant", r.Key, r.Owner, res, err)
	}
	return res.Token
}

func mustWaitPermits(t testing.TB, b *redislock.Backend, r driver.PermitRequest) {
	t.Helper()
	res, err := b.AcquirePermits(context.Background(), r)
	if err != nil || res.Acquired {
		t.Fatalf("AcquirePermits(%q, %s) = %+v, %v; want a refusal", r.Key, r.Owner, res, err)
	}
}

// handedToken reads the next wake-up message, which must be a permit
// handoff naming owner, and returns its token.
func handedToken(t *testing.T, ctx context.Context, msgs <-chan *redis.Message, owner lockx.Owner) lockx.Token {
	t.Helper()
	var msg *redis.Message
	select {
	case msg = <-msgs:
	case <-ctx.Done():
		t.Fatal("no wake-up message")
	}
	// "+<token>:<lease ms>:<len(owner)>:<owner><lock key>"
	if !strings.HasPrefix(msg.Payload, "+") {
		t.Fatalf("wake-up %q is not a permit handoff", msg.Payload)
	}
	f := strings.SplitN(msg.Payload[1:], ":", 4)
	if len(f) != 4 || !strings.HasPrefix(f[3], string(owner)) {
		t.Fatalf("handoff %q does not name %s", msg.Payload, owner)
	}
	tok, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		t.Fatalf("handoff %q: %v", msg.Payload, err)
	}
	return lockx.Token(tok)
}

// TestSemaphoreHandoffWithoutRoundTrip: a release hands the freed permit to
// the queued waiter in the same script and pushes the grant to its backend,
// whose next attempt is answered without a round trip.
func TestSemaphoreHandoffWithoutRoundTrip(t *testing.T) {
	holder, waiter, hook, msgs := handoffSetup(t)
	ctx := ctxT(t, 10*time.Second)
	const key, lease = "sem-handoff", 2 * time.Second
	prev := mustPermits(t, holder, permitReq(key, "holder", lease, 1, 1))
	wake, cancel, err := waiter.Watch(ctx, key, "head")
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	mustWaitPermits(t, waiter, permitReq(key, "head", lease, 1, 1))

	if err := holder.ReleasePermits(ctx, key, "holder"); err != nil {
		t.Fatal(err)
	}
	sent := handedToken(t, ctx, msgs, "head")
	select {
	case <-wake:
	case <-ctx.Done():
		t.Fatal("head not woken")
	}
	select {
	case m := <-msgs:
		t.Fatalf("second message %q for one handoff", m.Payload)
	case <-time.After(50 * time.Millisecond):
	}
	// The permit is the head's on the server already.
	if u, err := holder.Permits(ctx, key); err != nil || u != (driver.PermitUsage{InUse: 1, Holders: 1}) {
		t.Errorf("usage after the release = %+v, %v; want the head's permit and no one queued", u, err)
	}

	before := hook.n.Load()
	res, err := waiter.AcquirePermits(ctx, permitReq(key, "head", lease, 1, 1))
	if err != nil || !res.Acquired {
		t.Fatalf("head's attempt after the handoff = %+v, %v", res, err)
	}
	if n := hook.n.Load() - before; n != 0 {
		t.Errorf("head's attempt after the handoff cost %d round trips, want 0", n)
	}
	if res.Token != sent || res.Token <= prev {
		t.Errorf("token %d: want the message's %d, above the previous %d", res.Token, sent, prev)
	}
	if res.TTL <= 0 || res.TTL > lease {
		t.Errorf("TTL %v, want in (0, %v]", res.TTL, lease)
	}
	// A retry goes to the server and is idempotent; the permit is owned.
	if tok := mustPermits(t, waiter, permitReq(key, "head", lease, 1, 1)); tok != res.Token {
		t.Errorf("retry token %d, want %d", tok, res.Token)
	}
	if err := waiter.ExtendPermits(ctx, key, "head", lease); err != nil {
		t.Errorf("extend of the handed permit: %v", err)
	}
	if err := waiter.ReleasePermits(ctx, key, "head"); err != nil {
		t.Fatal(err)
	}
	if tok := mustPermits(t, holder, permitReq(key, "other", lease, 1, 1)); tok <= res.Token {
		t.Errorf("next token %d not above %d", tok, res.Token)
	}
}

// TestSemaphoreHandoffGivenUp: permits handed to a waiter that gave up
// before taking them up are not lost — its withdrawal (the core releases
// on giving up) returns them, and they go on to the next in line — and no
// record of the handoff survives to answer a later attempt.
func TestSemaphoreHandoffGivenUp(t *testing.T) {
	holder, waiter, hook, msgs := handoffSetup(t)
	ctx := ctxT(t, 10*time.Second)
	const key, lease = "sem-given-up", 5 * time.Second
	mustPermits(t, holder, permitReq(key, "holder", lease, 2, 2))
	_, cancel, err := waiter.Watch(ctx, key, "head")
	if err != nil {
		t.Fatal(err)
	}
	mustWaitPermits(t, waiter, permitReq(key, "head", lease, 2, 2))
	mustWaitPermits(t, holder, permitReq(key, "second", lease, 2, 1))
	if err := holder.ReleasePermits(ctx, key, "holder"); err != nil {
		t.Fatal(err)
	}
	handed := handedToken(t, ctx, msgs, "head")
	cancel()
	if err := waiter.ReleasePermits(ctx, key, "head"); err != nil {
		t.Errorf("withdrawal of a waiter handed permits = %v, want their return", err)
	}
	second := handedToken(t, ctx, msgs, "second")
	if second <= handed {
		t.Errorf("second waiter's token %d not above %d", second, handed)
	}
	if u, err := holder.Permits(ctx, key); err != nil || u != (driver.PermitUsage{InUse: 1, Holders: 1}) {
		t.Errorf("usage = %+v, %v; want the second waiter's permit alone", u, err)
	}
	if tok := mustPermits(t, holder, permitReq(key, "second", lease, 2, 1)); tok != second {
		t.Errorf("second waiter's grant %d, want the handed %d", tok, second)
	}
	before := hook.n.Load()
	res, err := waiter.AcquirePermits(ctx, permitReq(key, "head", lease, 2, 2))
	if err != nil || res.Acquired {
		t.Errorf("head's attempt after giving up = %+v, %v; want a refusal", res, err)
	}
	if hook.n.Load() == before {
		t.Error("attempt after withdrawal answered from a stale record")
	}
}

// TestSemaphoreHandoffCrashedWaiter: a waiter that crashed after its last
// attempt is handed the permits all the same, with the lease it asked for
// capped at its queue TTL; they come back when that ends.
func TestSemaphoreHandoffCrashedWaiter(t *testing.T) {
	holder, waiter, _, _ := handoffSetup(t)
	ctx := ctxT(t, 20*time.Second)
	const key, lease, qttl = "sem-crashed", 10 * time.Second, 400 * time.Millisecond
	mustPermits(t, holder, permitReq(key, "holder", lease, 1, 1))
	crashed := permitReq(key, "crashed", lease, 1, 1)
	crashed.QueueTTL = qttl
	mustWaitPermits(t, waiter, crashed)
	mustWaitPermits(t, holder, permitReq(key, "next", lease, 1, 1))
	if err := holder.ReleasePermits(ctx, key, "holder"); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	if u, err := holder.Permits(ctx, key); err != nil || u.InUse != 1 {
		t.Fatalf("usage after the release = %+v, %v; want the crashed waiter's permit", u, err)
	}
	d := pollGrant(t, released, qttl+3*time.Second, "permit of a crashed waiter not returned", func() (driver.Result, error) {
		return holder.AcquirePermits(ctx, permitReq(key, "next", lease, 1, 1))
	})
	if d > qttl+time.Second {
		t.Errorf("next waiter granted %v after the release, queue TTL %v", d, qttl)
	}
}
