package httplock_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/lockx-go/lockx/internal/lockxd"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/middleware"
)

// A Client over a signing lockxd gets each lock's signature with its grant:
// the tenant's resource verifies it with the tenant's derived key, the
// server's fence accepts it, and refuses the token without it.
func TestSignedGrantsEndToEnd(t *testing.T) {
	serverKey := []byte("lockxd server signing key, 32 b!")
	srv := lockxd.NewServer(memlock.New(), lockxd.Config{Tenants: tenants(), TokenSigningKey: serverKey})
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	t.Cleanup(srv.Shutdown)
	ctx := ctxT(t, 10*time.Second)
	c := newClient(t, ts.URL, "key-a")
	l, err := c.Acquire(ctx, "docs/1")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if l.TokenSignature() == "" {
		t.Fatal("no signature from a signing lockxd")
	}
	// The resource of tenant a, with tenant a's key.
	h := middleware.Fencing(memlock.NewFenceStore(), middleware.WithTokenVerification(lockxd.TenantSigningKey(serverKey, "a")))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	res := httptest.NewServer(h)
	defer res.Close()
	hc := &http.Client{Transport: &middleware.Transport{}}
	req, _ := http.NewRequestWithContext(lockx.ContextWithLock(ctx, l), "PUT", res.URL, nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("signed token at the tenant's resource: %d", resp.StatusCode)
	}
	hb := client(t, ts.URL, "key-a")
	if err := hb.FenceSigned(ctx, "docs/1", l.Token(), l.TokenSignature()); err != nil {
		t.Fatalf("signed fence through lockxd: %v", err)
	}
	if err := hb.Fence(ctx, "docs/1", lockx.MaxToken); !errors.Is(err, lockx.ErrBadSignature) {
		t.Fatalf("unsigned fence through a signing lockxd: %v", err)
	}
}
