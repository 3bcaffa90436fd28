package redislock

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

func TestOwnerEncoding(t *testing.T) {
	owners := []lockx.Owner{
		lockx.NewOwner(), "00" + "6162636465666768696a6b6c6d6e6f", // hex of a 15-byte string
		"abcdefghijklmno", "abcdefghijklmno\x02", "abcdefghijklmnop", "abcdefghijklmnop\x01",
		"0123456789ABCDEF0123456789ABCDEF", "0123456789abcdef0123456789abcdeg", "x", "x\x01",
		"0123456789abcdef0123456789abcde", "0123456789abcdef0123456789abcdef0",
		"\x01", "\x02\x02", "",
	}
	seen := map[string]lockx.Owner{}
	for _, o := range owners {
		e := encodeOwner(o)
		if e == "" {
			t.Errorf("owner %q encodes to the empty string (the tombstone's owner)", o)
		}
		if prev, dup := seen[e]; dup {
			t.Errorf("owners %q and %q share the encoding %q", prev, o, e)
		}
		seen[e] = o
		if got := decodeOwner(e); got != o {
			t.Errorf("decodeOwner(encodeOwner(%q)) = %q", o, got)
		}
		if isHex := len(o) == 32 && strings.ToLower(string(o)) == string(o) && len(e) == 16; isHex != (len(e) == 16) {
			t.Errorf("owner %q: encoding %q has length 16 iff the owner is 32 lowercase hex digits", o, e)
		}
	}
	if n := len(encodeOwner(lockx.NewOwner())); n != 16 {
		t.Errorf("a NewOwner encodes to %d bytes, want 16", n)
	}
}

func TestKeysShareTag(t *testing.T) {
	b := New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}))
	defer b.rdb.Close()
	for _, k := range []string{"plain", "{a}", "a}b", "}", "}x", "{", "{}", "x{}y", "}{", ""} {
		lk, q, d, w := b.keys(k)
		if lk != b.lockKey(k) {
			t.Errorf("key %q: lock %q vs lockKey %q", k, lk, b.lockKey(k))
		}
		tag := hashTag(lk)
		if tag == "" {
			t.Errorf("key %q: lock key %q has no hash tag", k, lk)
		}
		for _, other := range []string{q, d, w} {
			if !strings.HasPrefix(other, lk+":") || hashTag(other) != tag {
				t.Errorf("key %q: %q and %q differ in hash tag", k, lk, other)
			}
		}
	}
}

// A subscription that stops answering pings is replaced, and its watchers
// are woken once the new one is confirmed.
func TestSilentSubscriptionReplaced(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = rdb.Close() })
	b := New(rdb)
	t.Cleanup(func() { _ = b.Close() })
	b.n.health = 100 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	wake, stop, err := b.Watch(ctx, "k", lockx.NewOwner())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	time.Sleep(300 * time.Millisecond) // a few idle pings answered
	for len(wake) > 0 {
		<-wake
	}
	// Pause every client: pings go unanswered until the pause ends.
	if err := rdb.ClientPause(ctx, time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-wake:
	case <-time.After(5 * time.Second):
		t.Fatal("watcher not woken after the silent subscription was replaced")
	}
}

func TestFirstKey(t *testing.T) {
	k := "lockx:{b}"
	cases := []struct {
		args []any
		key  string
		ok   bool
	}{
		{[]any{"evalsha", "sha", "4", "lockx:{a}", "q", "d", "w"}, "lockx:{a}", true},
		{[]any{"evalsha", "sha", 3, &k, "q", "d"}, k, true},
		{[]any{"evalsha", "sha", "0", "argv"}, "", false},
		{[]any{"eval", "src", 0}, "", false},
		{[]any{"hget", "h", "n"}, "h", true},
		{[]any{"ping"}, "", false},
		{[]any{"hget", 7, "n"}, "", false},
	}
	for _, c := range cases {
		cmd := redis.NewCmd(context.Background(), c.args...)
		if key, ok := firstKey(cmd); key != c.key || ok != c.ok {
			t.Errorf("firstKey(%v) = %q, %v; want %q, %v", c.args, key, ok, c.key, c.ok)
		}
	}
}

// TestQuorumNodesRace: a Quorum's nodes keep waiters without Fair out of
// their queues (each node's queue would hand the key to its own head, and
// heads that differ leave no one with a majority); a plain Backend queues
// them. (Fails without racingWaiters on the nodes: the waiter queues.)
func TestQuorumNodesRace(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { _ = rdb.Close() })
	q := NewQuorum([]redis.UniversalClient{rdb})
	t.Cleanup(func() { _ = q.Close() })
	plain := New(rdb)
	t.Cleanup(func() { _ = plain.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, c := range []struct {
		name   string
		b      *Backend
		queues bool
	}{{"quorum node", q.nodes[0].b, false}, {"plain backend", plain, true}} {
		key := "race:" + string(lockx.NewOwner())
		holder, waiter := lockx.NewOwner(), lockx.NewOwner()
		if res, err := c.b.Acquire(ctx, driver.Request{Key: key, Owner: holder, Lease: 5 * time.Second}); err != nil || !res.Acquired {
			t.Fatalf("%s: holder: %v %v", c.name, res, err)
		}
		res, err := c.b.Acquire(ctx, driver.Request{Key: key, Owner: waiter, Lease: 5 * time.Second, Wait: true})
		if err != nil || res.Acquired {
			t.Fatalf("%s: waiter behind a holder: %v %v", c.name, res, err)
		}
		lk, qk, _, _ := c.b.keys(key)
		if n, _ := rdb.Exists(ctx, qk).Result(); (n == 1) != c.queues {
			t.Errorf("%s: a waiter without Fair queued: %v, want %v", c.name, n == 1, c.queues)
		}
		_ = c.b.Release(ctx, key, holder)
		_ = c.b.Release(ctx, key, waiter)
		_ = rdb.Del(ctx, lk, qk)
	}
}

// subscribed returns a Backend of the machine's Redis whose subscription is
// confirmed, closed at cleanup, and a context for the test.
func subscribed(t *testing.T) (*Backend, context.Context) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(t)})
	t.Cleanup(func() { _ = rdb.Close() })
	b := New(rdb)
	t.Cleanup(func() { _ = b.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	_, stop, err := b.Watch(ctx, "warm", lockx.NewOwner())
	if err != nil {
		t.Fatal(err)
	}
	stop()
	return b, ctx
}

// A message that names a waiter before its refusal is recorded (it overtook
// the reply of the attempt that queued the waiter) is not taken as a grant,
// but fires the waiter's Watch at once, so that it asks the server.
func TestEarlyMessageFiresWatch(t *testing.T) {
	b, ctx := subscribed(t)
	owner := lockx.NewOwner()
	lk, enc := b.lockKey("k"), encodeOwner(owner)
	epoch := b.n.queued()
	if epoch == 0 {
		t.Fatal("subscription confirmed, but queued() = 0")
	}
	sent := time.Now()
	b.n.mu.Lock()
	b.n.named(lk, enc, 42, 5*time.Second) // the handoff, before the reply
	b.n.mu.Unlock()
	b.n.refused(lk, enc, sent, 5*time.Second, 5*time.Second, epoch)
	if _, ok := b.n.takeHandoff(lk, enc, 5*time.Second, true); ok {
		t.Fatal("an early message was taken as a grant")
	}
	// Its Watch fires at once.
	owner2 := lockx.NewOwner()
	enc2 := encodeOwner(owner2)
	b.n.mu.Lock()
	b.n.named(lk, enc2, 43, 5*time.Second)
	b.n.mu.Unlock()
	b.n.refused(lk, enc2, sent, 5*time.Second, 5*time.Second, epoch)
	wake2, stop2, err := b.Watch(ctx, "k", owner2)
	if err != nil {
		t.Fatal(err)
	}
	defer stop2()
	select {
	case <-wake2:
	default:
		t.Fatal("the Watch of a waiter whose message came before its refusal did not fire at once")
	}
}

// A Watch registered after the subscription was lost or renewed, since the
// attempt that queued its waiter was sent, fires at once: messages may have
// been lost in between. One in the same epoch does not.
func TestWatchAfterLostSubscriptionFires(t *testing.T) {
	b, ctx := subscribed(t)
	lk := b.lockKey("k")
	quiet, lost := lockx.NewOwner(), lockx.NewOwner()
	epoch := b.n.queued()
	b.n.refused(lk, encodeOwner(quiet), time.Now(), time.Second, time.Second, epoch)
	w1, stop1, err := b.Watch(ctx, "k", quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer stop1()
	select {
	case <-w1:
		t.Fatal("a Watch in the attempt's epoch fired at once")
	default:
	}
	b.n.refused(lk, encodeOwner(lost), time.Now(), time.Second, time.Second, epoch)
	b.n.lost()
	if b.n.queued() != 0 {
		t.Fatal("queued() promises wake-ups while the subscription is down")
	}
	w2, stop2, err := b.Watch(ctx, "k", lost)
	if err != nil {
		t.Fatal(err)
	}
	defer stop2()
	select {
	case <-w2:
	default:
		t.Fatal("a Watch after the subscription was lost did not fire at once")
	}
}
