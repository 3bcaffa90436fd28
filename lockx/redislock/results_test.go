package redislock_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/lockx-go/lockx/patterns/idempotency/idemtest"
)

func TestResultStoreSingle(t *testing.T) {
	rdb := single(t)
	b := backend(t, rdb)
	idemtest.RunStore(t, func(*testing.T) driver.ResultStore { return b })
}

func TestResultStoreCluster(t *testing.T) {
	c := testenv.SharedCluster(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs})
	t.Cleanup(func() { _ = rdb.Close() })
	b := backend(t, rdb)
	idemtest.RunStore(t, func(*testing.T) driver.ResultStore { return b })
	// Keys that start with '}' take the fixed hash tag.
	if _, _, err := b.SaveResult(t.Context(), "}odd{key", driver.Outcome{Value: []byte("x")}, 60e9); err != nil {
		t.Fatal(err)
	}
}

func TestResultStoreShareable(t *testing.T) {
	// Two backends with one prefix (two service instances) see one outcome.
	rdb := single(t)
	p := redislock.WithPrefix("lockxtest:" + t.Name() + ":")
	a, b := backend(t, rdb, p), backend(t, rdb, p)
	if _, saved, err := a.SaveResult(t.Context(), "k", driver.Outcome{Value: []byte("a")}, 60e9); err != nil || !saved {
		t.Fatal(saved, err)
	}
	got, err := b.LoadResult(t.Context(), "k")
	if err != nil || string(got.Value) != "a" {
		t.Fatalf("other instance loaded %q, %v", got.Value, err)
	}
	_ = b.DeleteResult(t.Context(), "k")
}
