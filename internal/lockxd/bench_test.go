package lockxd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// BenchmarkAcquireRelease: one uncontended try-acquire + release, through
// lockxd (HTTP over loopback) and directly on the backend.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, bc := range []struct {
		name string
		new  func(b *testing.B) driver.Backend
	}{
		{"memlock", func(b *testing.B) driver.Backend { return memlock.New() }},
		{"redis", func(b *testing.B) driver.Backend {
			rdb := redis.NewClient(&redis.Options{Addr: testenv.RedisAddr(b)})
			be := redislock.New(rdb, redislock.WithPrefix(fmt.Sprintf("lockxd-bench:%d:", time.Now().UnixNano())))
			b.Cleanup(func() { _ = be.Close(); _ = rdb.Close() })
			return be
		}},
	} {
		b.Run(bc.name+"/direct", func(b *testing.B) {
			be := bc.new(b)
			ctx := context.Background()
			for b.Loop() {
				o := lockx.NewOwner()
				res, err := be.Acquire(ctx, driver.Request{Key: "k", Owner: o, Lease: 10 * time.Second})
				if err != nil || !res.Acquired {
					b.Fatal(err)
				}
				if err := be.Release(ctx, "k", o); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(bc.name+"/lockxd", func(b *testing.B) {
			ts := httptest.NewServer(NewServer(bc.new(b), Config{Tenants: tenants()}))
			defer ts.Close()
			c := ts.Client()
			post := func(path, body string) map[string]any {
				req, _ := http.NewRequest("POST", ts.URL+path, strings.NewReader(body))
				req.Header.Set("X-API-Key", "key-a")
				res, err := c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				defer res.Body.Close()
				raw, _ := io.ReadAll(res.Body)
				if res.StatusCode != 200 {
					b.Fatalf("%s: %d %s", path, res.StatusCode, raw)
				}
				var m map[string]any
				_ = json.Unmarshal(raw, &m)
				return m
			}
			for b.Loop() {
				g := post("/v1/locks/try-acquire", `{"key":"k","lease_ms":10000}`)
				post("/v1/locks/release", fmt.Sprintf(`{"key":"k","owner":%q}`, g["owner"]))
			}
		})
	}
}
