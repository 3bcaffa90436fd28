package middleware_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/middleware"
)

// echoHeaders answers with the fencing headers it received.
var echoHeaders = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Got-Key", r.Header.Get("Lock-Key"))
	w.Header().Set("Got-Token", r.Header.Get("Fencing-Token"))
})

func roundTrip(t *testing.T, ctx context.Context, c *http.Client, url string, header http.Header) (key, token string, err error) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "PUT", url, nil)
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", "", err
	}
	resp.Body.Close()
	if req.Header.Get("Lock-Key") != header.Get("Lock-Key") {
		t.Error("Transport modified the caller's request")
	}
	return resp.Header.Get("Got-Key"), resp.Header.Get("Got-Token"), nil
}

func TestTransport(t *testing.T) {
	srv := httptest.NewServer(echoHeaders)
	defer srv.Close()
	ctx := context.Background()
	locks := lockx.New(memlock.New())
	defer locks.Close()
	c := &http.Client{Transport: &middleware.Transport{}}

	l, err := locks.Acquire(ctx, "orders/1")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)

	if k, tok, err := roundTrip(t, ctx, c, srv.URL, nil); err != nil || k != "" || tok != "" {
		t.Fatalf("no lock: %q %q %v", k, tok, err)
	}
	lctx := lockx.ContextWithLock(ctx, l)
	if k, tok, err := roundTrip(t, lctx, c, srv.URL, nil); err != nil || k != "orders/1" || tok != l.Token().String() {
		t.Fatalf("under lock: %q %q %v", k, tok, err)
	}
	// Headers set by the caller win.
	if k, tok, err := roundTrip(t, lctx, c, srv.URL, hdr("Lock-Key", "other", "Fencing-Token", "99")); err != nil || k != "other" || tok != "99" {
		t.Fatalf("explicit headers: %q %q %v", k, tok, err)
	}
	// An incoming request's fence is forwarded.
	fctx := middleware.ContextWithFence(ctx, middleware.Fence{Resource: "docs/9", Token: 41})
	if k, tok, err := roundTrip(t, fctx, c, srv.URL, nil); err != nil || k != "docs/9" || tok != "41" {
		t.Fatalf("forwarded fence: %q %q %v", k, tok, err)
	}
	// The lock, when both are there, takes precedence: it is the caller's own.
	if k, tok, err := roundTrip(t, lockx.ContextWithLock(fctx, l), c, srv.URL, nil); err != nil || k != "orders/1" || tok != l.Token().String() {
		t.Fatalf("lock over fence: %q %q %v", k, tok, err)
	}
}

func TestTransportRefusesLostLock(t *testing.T) {
	srv := httptest.NewServer(echoHeaders)
	defer srv.Close()
	ctx := context.Background()
	locks := lockx.New(memlock.New())
	defer locks.Close()
	l, err := locks.Acquire(ctx, "k", lockx.WithLease(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	<-l.Lost()
	c := &http.Client{Transport: &middleware.Transport{}}
	_, _, err = roundTrip(t, lockx.ContextWithLock(ctx, l), c, srv.URL, nil)
	if !errors.Is(err, lockx.ErrLost) {
		t.Fatalf("request under a lost lock: %v, want ErrLost", err)
	}
}

// Services calling services: the fence checked at the edge reaches the
// next service's check unchanged.
func TestFenceForwardedThroughServices(t *testing.T) {
	store := memlock.NewFenceStore()
	inner := httptest.NewServer(middleware.Fencing(store)(http.HandlerFunc(okHandler)))
	defer inner.Close()
	c := &http.Client{Transport: &middleware.Transport{}}
	outer := httptest.NewServer(middleware.Fencing(memlock.NewFenceStore())(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), "PUT", inner.URL, nil)
		resp, err := c.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		resp.Body.Close()
		w.WriteHeader(resp.StatusCode)
	})))
	defer outer.Close()
	send := func(tok string) int {
		req, _ := http.NewRequest("PUT", outer.URL, nil)
		req.Header.Set("Lock-Key", "r")
		req.Header.Set("Fencing-Token", tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := send("5"); got != 204 {
		t.Fatalf("first write: %d", got)
	}
	if store.Seen("r") != 5 {
		t.Fatalf("inner service saw token %d, want 5", store.Seen("r"))
	}
}
