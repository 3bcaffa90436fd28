package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/redislock"
)

func wantStale(t *testing.T, err error, token, seen lockx.Token) {
	t.Helper()
	var se *lockx.StaleTokenError
	if !errors.As(err, &se) || !errors.Is(err, lockx.ErrStaleToken) || se.Token != token || se.Seen != seen {
		t.Fatalf("got %v, want stale token %d (seen %d)", err, token, seen)
	}
}

func testFence(t *testing.T, b *redislock.Backend) {
	ctx := ctxT(t, 10*time.Second)
	for _, r := range []string{"docs/1", "}odd{resource"} {
		if err := b.Fence(ctx, r, 5); err != nil {
			t.Fatal(err)
		}
		if err := b.Fence(ctx, r, 5); err != nil {
			t.Fatalf("equal token refused: %v", err)
		}
		wantStale(t, b.Fence(ctx, r, 4), 4, 5)
		if err := b.Fence(ctx, r, lockx.MaxToken); err != nil {
			t.Fatal(err)
		}
		wantStale(t, b.Fence(ctx, r, 6), 6, lockx.MaxToken)
	}
	if err := b.Fence(ctx, "docs/2", 1); err != nil {
		t.Fatalf("resources are independent: %v", err)
	}
	for _, bad := range []struct {
		r   string
		tok lockx.Token
	}{{"", 1}, {"r", 0}, {"r", lockx.MaxToken + 1}} {
		if err := b.Fence(ctx, bad.r, bad.tok); !errors.Is(err, lockx.ErrInvalidArgument) {
			t.Errorf("Fence(%q, %d) = %v", bad.r, bad.tok, err)
		}
	}
}

// fenceBackend returns a backend whose keys — fences never expire — are
// deleted when the test ends.
func fenceBackend(t *testing.T, rdb redis.UniversalClient) *redislock.Backend {
	p := testPrefix()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		del := func(ctx context.Context, c *redis.Client) error {
			iter := c.Scan(ctx, 0, p+"*", 100).Iterator()
			for iter.Next(ctx) {
				c.Del(ctx, iter.Val())
			}
			return iter.Err()
		}
		switch c := rdb.(type) {
		case *redis.ClusterClient:
			_ = c.ForEachMaster(ctx, del)
		case *redis.Client:
			_ = del(ctx, c)
		}
	})
	return backend(t, rdb, redislock.WithPrefix(p))
}

func TestFenceSingle(t *testing.T) { testFence(t, fenceBackend(t, single(t))) }

func TestFenceCluster(t *testing.T) {
	c := testenv.SharedCluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs})
	t.Cleanup(func() { _ = rdb.Close() })
	b := fenceBackend(t, rdb)
	testFence(t, b)

	ctx := ctxT(t, 10*time.Second)
	err := b.FencedSet(ctx, "docs/1", lockx.MaxToken, "doc:docs/1", "x", 0)
	if !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Fatalf("untagged key on Cluster: %v, want an ArgError", err)
	}
	if err := b.FencedSet(ctx, "docs/1", lockx.MaxToken, "doc:{docs/1}", "x", 0); err != nil {
		t.Fatalf("tagged key on Cluster: %v", err)
	}
	if got, _ := rdb.Get(ctx, "doc:{docs/1}").Result(); got != "x" {
		t.Fatalf("value %q", got)
	}
	rdb.Del(ctx, "doc:{docs/1}")
}

func TestFencedSet(t *testing.T) {
	rdb := single(t)
	b := fenceBackend(t, rdb)
	ctx := ctxT(t, 10*time.Second)
	key := "lockxtest:doc:{" + randHex(4) + "}"
	resource := hashTagOf(key)
	t.Cleanup(func() { rdb.Del(context.Background(), key) })

	if err := b.FencedSet(ctx, resource, 34, key, "B", 0); err != nil {
		t.Fatal(err)
	}
	wantStale(t, b.FencedSet(ctx, resource, 33, key, "A", 0), 33, 34)
	if got, _ := rdb.Get(ctx, key).Result(); got != "B" {
		t.Fatalf("stale write landed: %q", got)
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl != -1 {
		t.Fatalf("ttl %v, want none", ttl)
	}
	if err := b.FencedSet(ctx, resource, 34, key, []byte("B2"), time.Minute); err != nil {
		t.Fatalf("same holder writes again: %v", err)
	}
	if got, _ := rdb.Get(ctx, key).Result(); got != "B2" {
		t.Fatalf("value %q", got)
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 0 || ttl > time.Minute {
		t.Fatalf("ttl %v, want about a minute", ttl)
	}
	// Fence and FencedSet share the state.
	wantStale(t, b.Fence(ctx, resource, 30), 30, 34)
	if err := b.Fence(ctx, resource, 35); err != nil {
		t.Fatal(err)
	}
	wantStale(t, b.FencedSet(ctx, resource, 34, key, "late", 0), 34, 35)

	for name, err := range map[string]error{
		"empty key": b.FencedSet(ctx, resource, 40, "", "x", 0),
		"neg ttl":   b.FencedSet(ctx, resource, 40, key, "x", -time.Second),
		"zero tok":  b.FencedSet(ctx, resource, 0, key, "x", 0),
	} {
		if !errors.Is(err, lockx.ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Two writers race with interleaved tokens: whatever the order, the value
// left is the one written with the highest token that was accepted, and no
// write with a lower token lands after it.
func TestFencedSetConcurrent(t *testing.T) {
	rdb := single(t)
	b := fenceBackend(t, rdb)
	ctx := ctxT(t, 30*time.Second)
	key := "lockxtest:doc:{" + randHex(4) + "}"
	resource := hashTagOf(key)
	t.Cleanup(func() { rdb.Del(context.Background(), key) })
	errc := make(chan error, 2)
	for w := 0; w < 2; w++ {
		go func(w int) {
			for i := 1; i <= 100; i++ {
				tok := lockx.Token(2*i + w)
				err := b.FencedSet(ctx, resource, tok, key, tok.String(), 0)
				if err != nil && !errors.Is(err, lockx.ErrStaleToken) {
					errc <- err
					return
				}
			}
			errc <- nil
		}(w)
	}
	for range 2 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := rdb.Get(ctx, key).Result(); got != "201" {
		t.Fatalf("final value %q, want the highest token's write 201", got)
	}
}

func TestFenceUnavailable(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = rdb.Close() })
	b := redislock.New(rdb)
	if err := b.Fence(t.Context(), "r", 1); !errors.Is(err, lockx.ErrUnavailable) {
		t.Fatalf("Fence against no server: %v", err)
	}
}

func hashTagOf(key string) string {
	i := 0
	for key[i] != '{' {
		i++
	}
	j := i + 1
	for key[j] != '}' {
		j++
	}
	return key[i+1 : j]
}

func ExampleBackend_FencedSet() {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	b := redislock.New(rdb)
	locks := lockx.New(b)
	defer locks.Close()

	err := locks.Do(ctx, "docs/1", func(ctx context.Context) error {
		l, _ := lockx.LockFromContext(ctx)
		// The key carries the resource as its hash tag: one Cluster slot.
		return b.FencedSet(ctx, "docs/1", l.Token(), "doc:{docs/1}", "new body", 0)
	})
	if errors.Is(err, lockx.ErrStaleToken) {
		fmt.Println("a newer holder has written; this write was refused")
	}
}
