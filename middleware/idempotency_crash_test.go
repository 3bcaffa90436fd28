package middleware_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/lockx-go/lockx/middleware"
	"github.com/lockx-go/lockx/patterns/idempotency"
	"github.com/lockx-go/lockx/patterns/idempotency/idemtest"
)

const (
	crashLease     = time.Second
	crashRetention = time.Hour
)

// crashServer is the service of the crash test as every process runs it:
// the Idempotency-Key middleware over Redis at addr under prefix, in front
// of app; app gets the Redis client for its work counter.
func crashServer(addr, prefix string, app func(rdb *redis.Client) http.Handler) (http.Handler, *redis.Client, func(), error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	locks := lockx.New(redislock.New(rdb, redislock.WithPrefix(prefix)))
	closeAll := func() { _ = locks.Close(); _ = rdb.Close() }
	g, err := idempotency.New(locks, idempotency.WithRetention(crashRetention),
		idempotency.WithLockOptions(lockx.WithWatchdog(crashLease)))
	if err != nil {
		closeAll()
		return nil, nil, nil, err
	}
	h := middleware.Idempotency(middleware.IdempotencyConfig{
		Guard:     g,
		Principal: func(r *http.Request) (string, error) { return r.Header.Get(idemtest.PrincipalHeader), nil },
	})(app(rdb))
	return h, rdb, closeAll, nil
}

// countingApp counts its runs in Redis, so that runs in every process count,
// and calls then after counting.
func countingApp(prefix string, then func(r *http.Request)) func(rdb *redis.Client) http.Handler {
	return func(rdb *redis.Client) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := rdb.Incr(r.Context(), prefix+"work").Err(); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			then(r)
			w.WriteHeader(http.StatusCreated)
		})
	}
}

func crashRequest(url, key string) *http.Request {
	req, _ := http.NewRequest("POST", url+"/orders", nil)
	req.Header.Set(middleware.HeaderIdempotencyKey, `"`+key+`"`)
	req.Header.Set(idemtest.PrincipalHeader, "alice")
	return req
}

// The holder: a server whose handler, once the request with the key is in
// it, stays there until the process is killed.
var _ = testenv.Role("middleware-holder", func(args []string) error {
	addr, prefix, key := args[0], args[1], args[2]
	h, _, closeAll, err := crashServer(addr, prefix, countingApp(prefix, func(r *http.Request) {
		testenv.Say("running")
		<-r.Context().Done()
	}))
	if err != nil {
		return err
	}
	defer closeAll()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go func() {
		resp, err := http.DefaultClient.Do(crashRequest("http://"+ln.Addr().String(), key))
		if err == nil {
			resp.Body.Close()
		}
		testenv.Say("the holder's request ended: %v", err)
	}()
	return http.Serve(ln, h)
})

// TestIdempotencyCrashedProcessRedis: a service process SIGKILLed while its
// handler serves a request with an Idempotency-Key keeps the key in progress
// (409) on every other instance while it lives, and the key is free for the
// retry one lease after the kill, not after the retention.
func TestIdempotencyCrashedProcessRedis(t *testing.T) {
	addr := testenv.RedisAddr(t)
	prefix, key := "lockxtest:mwcrash:"+rand.Text()+":", rand.Text()
	h, rdb, closeAll, err := crashServer(addr, prefix, countingApp(prefix, func(*http.Request) {}))
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	srv := httptest.NewServer(h)
	defer srv.Close()
	holder := testenv.StartChild(t, "middleware-holder", addr, prefix, key)
	holder.Expect(t, "running", 30*time.Second)
	idemtest.Crash{
		Lease: crashLease, Hold: 3 * crashLease, Retention: crashRetention,
		Call: func(t testing.TB) idemtest.Verdict {
			resp, err := srv.Client().Do(crashRequest(srv.URL, key))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			switch {
			case resp.StatusCode == http.StatusConflict:
				return idemtest.InProgress
			case resp.StatusCode != http.StatusCreated:
				t.Fatalf("status %d", resp.StatusCode)
			case resp.Header.Get(middleware.HeaderIdempotentReplayed) == "true":
				return idemtest.Replayed
			}
			return idemtest.Ran
		},
		Work: func(t testing.TB) int64 {
			n, err := rdb.Get(context.Background(), prefix+"work").Int64()
			if err != nil && !errors.Is(err, redis.Nil) {
				t.Fatal(err)
			}
			return n
		},
		Kill: holder.Kill,
	}.Run(t)
}
