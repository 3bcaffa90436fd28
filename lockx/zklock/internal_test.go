package zklock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

func TestEscape(t *testing.T) {
	for _, s := range []string{".", "..", "a/b", "order:42", "ключ", "a-b", "%", "\x00", "zookeeper"} {
		for _, dash := range []bool{false, true} {
			e := escape(s, dash)
			if e == "." || e == ".." || strings.ContainsAny(e, "/\x00") || (!dash && strings.Contains(e, "-")) {
				t.Errorf("escape(%q, %v) = %q: not a safe znode name part", s, dash, e)
			}
		}
	}
	if escape("a.b", true) == escape("a%2Eb", true) {
		t.Error("escape is not injective")
	}
	for _, bad := range []string{"", "-", "a-", "a-b", "-1", "a-b-c-1", "a-x"} {
		if _, ok := parseNode(bad); ok {
			t.Errorf("parseNode(%q) accepted", bad)
		}
	}
	if n, ok := parseNode("o-H3-0000000007"); !ok || n.owner != "o" || n.count() != 3 || n.seq != 7 {
		t.Errorf("parseNode(o-H3-0000000007) = %+v, %v", n, ok)
	}
}

// lostReply makes the state a create leaves when the server applied it but
// its reply was lost: owner's node exists under key, and the Backend only
// knows that the outcome is unknown.
func lostReply(t *testing.T, b *Backend, key string, owner lockx.Owner) created {
	t.Helper()
	c, err := b.create(b.dirOf(kindLock, key), owner, "")
	if err != nil {
		t.Fatal(err)
	}
	e := b.lockEntry(kindLock, key, owner, true)
	b.mu.Lock()
	e.unknown = true
	b.armLocked(e, time.Now().Add(300*time.Millisecond))
	b.mu.Unlock()
	b.unlockEntry(e)
	return c
}

func children(t *testing.T, b *Backend, key string) []string {
	t.Helper()
	cs, _, err := b.conn.Children(b.dirOf(kindLock, key))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestLostCreateReply: the node of a create whose reply was lost is
// adopted by the owner's next attempt (same node, its czxid as token),
// deleted by the owner's Release, and otherwise deleted by a timer — never
// left to block the key for the rest of the session.
func TestLostCreateReply(t *testing.T) {
	z := testenv.SharedZooKeeper(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := Dial(ctx, []string{z.Addr})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	key, owner := "adopt:"+t.Name(), lockx.NewOwner()
	c := lostReply(t, b, key, owner)
	res, err := b.Acquire(ctx, driver.Request{Key: key, Owner: owner, Lease: time.Minute})
	if err != nil || !res.Acquired || res.Token != c.token {
		t.Fatalf("retry after a lost reply = %+v, %v; want the lost node's grant, token %d", res, err, c.token)
	}
	if cs := children(t, b, key); len(cs) != 1 {
		t.Fatalf("nodes after the retry: %v, want the one adopted", cs)
	}
	if err := b.Release(ctx, key, owner); err != nil {
		t.Fatal(err)
	}

	key2, owner2 := "release:"+t.Name(), lockx.NewOwner()
	lostReply(t, b, key2, owner2)
	if err := b.Release(ctx, key2, owner2); err != nil {
		t.Fatalf("Release after a lost reply = %v, want nil (the node was found by name)", err)
	}
	if cs := children(t, b, key2); len(cs) != 0 {
		t.Fatalf("nodes after the Release: %v", cs)
	}

	key3 := "timer:" + t.Name()
	lostReply(t, b, key3, lockx.NewOwner())
	other := driver.Request{Key: key3, Owner: lockx.NewOwner(), Lease: time.Minute}
	if res, err := b.Acquire(ctx, other); err != nil || res.Acquired {
		t.Fatalf("Acquire while the orphan node heads the queue = %+v, %v; want a refusal", res, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, err := b.Acquire(ctx, driver.Request{Key: key3, Owner: other.Owner, Lease: time.Minute})
		if err == nil && res.Acquired {
			break
		}
		if err != nil && !errors.Is(err, lockx.ErrUnavailable) {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the orphan node of a lost reply was never removed")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestUnescape(t *testing.T) {
	for _, s := range []string{"", ".", "a/b", "order:42", "ключ", "a-b", "%", "%41", "\x00\xff"} {
		if got, ok := unescape(escape(s, true)); !ok || got != s {
			t.Errorf("unescape(escape(%q)) = %q, %v", s, got, ok)
		}
		if got, ok := unescape(escape(s, false)); !ok || got != s {
			t.Errorf("unescape(escape(%q, false)) = %q, %v", s, got, ok)
		}
	}
	for _, bad := range []string{"%", "%4", "%G0", "a%"} {
		if _, ok := unescape(bad); ok {
			t.Errorf("unescape(%q) accepted", bad)
		}
	}
}
