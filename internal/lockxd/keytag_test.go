package lockxd

import (
	"context"
	"fmt"
	"hash/fnv"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
)

// weakHash is a backend that, like pglock, locks a hash of the key rather
// than the key: here 16 bits of FNV-1a, so that a colliding pair is found
// by brute force in a test. Keys that collide share one lock.
type weakHash struct{ *memlock.Backend }

func h16(key string) string {
	h := fnv.New64a()
	h.Write([]byte(key))
	return fmt.Sprintf("h%04x", h.Sum64()&0xffff)
}

func (w weakHash) Acquire(ctx context.Context, r driver.Request) (driver.Result, error) {
	r.Key = h16(r.Key)
	return w.Backend.Acquire(ctx, r)
}

func (w weakHash) Release(ctx context.Context, key string, o driver.Owner) error {
	return w.Backend.Release(ctx, h16(key), o)
}

// collide finds a key of tenant b whose namespaced name has the same weak
// hash as tenant a's key: what an attacker computes from the names it can
// see (its own namespace and the victim's).
func collide(t *testing.T, victim string) string {
	want := h16("lockxd/a/" + victim)
	for i := 0; i < 1<<22; i++ {
		if k := fmt.Sprintf("x%d", i); h16("lockxd/b/"+k) == want {
			return k
		}
	}
	t.Fatal("no collision found")
	return ""
}

// The attack: tenant b crafts a key whose backend hash equals tenant a's
// key's and holds it, so a's key is refused. With a key salt the backend
// key carries a tag b cannot compute, and the crafted key misses.
func TestCraftedKeyCollision(t *testing.T) {
	crafted := collide(t, "payroll")
	for _, c := range []struct {
		name    string
		salt    []byte
		blocked bool
	}{
		{"without salt: the attack works", nil, true},
		{"with salt", []byte("per-deployment salt, 32 bytes ok"), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := NewServer(weakHash{memlock.New()}, Config{Tenants: tenants(), KeySalt: c.salt, MaxWait: time.Second})
			ts := httptest.NewServer(srv)
			defer ts.Close()
			if r := call(t, ts, "key-b", "POST", "/v1/locks/try-acquire", fmt.Sprintf(`{"key":%q,"lease_ms":30000}`, crafted)); r.status != 200 {
				t.Fatalf("b's crafted key: %d %s", r.status, r.raw)
			}
			r := call(t, ts, "key-a", "POST", "/v1/locks/try-acquire", `{"key":"payroll","lease_ms":30000}`)
			if blocked := r.status == 409; blocked != c.blocked {
				t.Fatalf("a's key after b's crafted one: %d %s (blocked %v, want %v)", r.status, r.raw, blocked, c.blocked)
			}
		})
	}
}

// With a salt, inspection and release still speak the tenant's key names.
func TestKeyTagInvisible(t *testing.T) {
	srv := NewServer(memlock.New(), Config{Tenants: tenants(), KeySalt: []byte("per-deployment salt, 32 bytes ok")})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	g := call(t, ts, "key-a", "POST", "/v1/locks/try-acquire", `{"key":"orders/42","lease_ms":30000}`)
	one := call(t, ts, "key-a", "GET", "/v1/locks?key=orders/42", "")
	all := call(t, ts, "key-a", "GET", "/v1/locks?prefix=orders/", "")
	locks, _ := all.body["locks"].([]any)
	if one.status != 200 || one.body["key"] != "orders/42" || len(locks) != 1 || locks[0].(map[string]any)["key"] != "orders/42" {
		t.Fatalf("inspection with tags: %s / %s", one.raw, all.raw)
	}
	if r := call(t, ts, "key-a", "POST", "/v1/locks/release", fmt.Sprintf(`{"key":"orders/42","owner":%q}`, g.body["owner"])); r.status != 200 {
		t.Fatalf("release: %d %s", r.status, r.raw)
	}
}
