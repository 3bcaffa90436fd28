package redislock_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/lockx-go/lockx/patterns/leader/leadertest"
)

// leaderSuite runs the leader-election suite over rdb: each instance is a
// client over a backend of its own, sharing one key prefix.
func leaderSuite(t *testing.T, rdb redis.UniversalClient) {
	prefix := redislock.WithPrefix(testPrefix())
	leadertest.Run(t, func(t *testing.T) *lockx.Client {
		c := lockx.New(backend(t, rdb, prefix))
		t.Cleanup(func() { _ = c.Close() })
		return c
	})
}

func TestLeader(t *testing.T)         { leaderSuite(t, single(t)) }
func TestLeaderCluster(t *testing.T)  { leaderSuite(t, clusterClient(t)) }
func TestLeaderSentinel(t *testing.T) { leaderSuite(t, sentinelClient(t)) }

// TestLeaderQuorum runs the suite on Redlock: each instance a Quorum of
// its own over three redis-servers.
func TestLeaderQuorum(t *testing.T) {
	cs := nodeClients(t, addrsOf(startNodes(t, 3))...)
	prefix := redislock.WithPrefix(testPrefix())
	leadertest.Run(t, func(t *testing.T) *lockx.Client {
		q := redislock.NewQuorum(cs, prefix, redislock.WithNodeTimeout(quorumNodeTimeout))
		c := lockx.New(q)
		t.Cleanup(func() { _ = c.Close(); _ = q.Close() })
		return c
	})
}
