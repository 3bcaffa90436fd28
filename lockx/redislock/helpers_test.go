package redislock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/redislock"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// randHex returns n random bytes in hex.
func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// testPrefix is a key prefix no other test (or engineer) shares.
func testPrefix() string { return "lockxtest:" + randHex(4) + ":" }

// single returns a client of the machine's Redis, closed at cleanup.
func single(t testing.TB) *redis.Client {
	t.Helper()
	return clientAt(t, testenv.RedisAddr(t))
}

func clientAt(t testing.TB, addr string) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// backend returns a Backend over rdb with a fresh prefix (unless opts set
// one), closed at cleanup.
func backend(t testing.TB, rdb redis.UniversalClient, opts ...redislock.Option) *redislock.Backend {
	t.Helper()
	b := redislock.New(rdb, append([]redislock.Option{redislock.WithPrefix(testPrefix())}, opts...)...)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func req(key string, owner lockx.Owner, lease time.Duration) driver.Request {
	return driver.Request{Key: key, Owner: owner, Lease: lease}
}

// fairWait is a fair, waiting request of owner for key "q" with a 5 s
// lease and queue TTL qttl (0: the Backend's default).
func fairWait(owner lockx.Owner, qttl time.Duration) driver.Request {
	r := req("q", owner, 5*time.Second)
	r.Fair, r.Wait, r.QueueTTL = true, true, qttl
	return r
}

func mustGrant(t testing.TB, b *redislock.Backend, r driver.Request) lockx.Token {
	t.Helper()
	res, err := b.Acquire(context.Background(), r)
	if err != nil || !res.Acquired {
		t.Fatalf("Acquire(%q, %s) = %+v, %v; want a grant", r.Key, r.Owner, res, err)
	}
	return res.Token
}

func mustRefuse(t testing.TB, b *redislock.Backend, r driver.Request) driver.Result {
	t.Helper()
	res, err := b.Acquire(context.Background(), r)
	if err != nil || res.Acquired {
		t.Fatalf("Acquire(%q, %s) = %+v, %v; want a refusal", r.Key, r.Owner, res, err)
	}
	return res
}

func maxprocs() int { return runtime.GOMAXPROCS(0) }

// clusterClient returns a client of the shared test Cluster, closed at
// cleanup.
func clusterClient(t testing.TB) *redis.ClusterClient {
	t.Helper()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: testenv.SharedCluster(t).Addrs})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// sentinelClient returns a failover client of the shared test Sentinel
// deployment, closed at cleanup.
func sentinelClient(t testing.TB) *redis.Client {
	t.Helper()
	s := testenv.SharedSentinel(t)
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: s.MasterName, SentinelAddrs: s.SentinelAddrs})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}
