package leader_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/patterns/leader"
)

// instance is one service instance: a running candidate and an HTTP server
// whose handler, behind Middleware, answers with its identity and term.
type instance struct {
	srv *httptest.Server
	c   *leader.Candidate
}

func startInstance(t *testing.T, store driver.Backend, id string, opts ...leader.HTTPOption) *instance {
	locks := lockx.New(store)
	e, err := leader.New(locks, "admin", leader.WithIdentity(id), leader.WithLease(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	c := leader.NewCandidate(e)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	h := leader.Middleware(c, opts...)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tm, _ := leader.TermFromContext(r.Context())
		fmt.Fprintf(w, "%s %d", tm.Identity(), tm.Token())
	}))
	in := &instance{srv: httptest.NewServer(h), c: c}
	t.Cleanup(func() {
		in.srv.Close()
		stop()
		<-done
		locks.Close()
	})
	return in
}

func waitLeads(t *testing.T, c *leader.Candidate) *leader.Term {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if tm, ok := c.Term(); ok {
			return tm
		}
		if time.Now().After(deadline) {
			t.Fatal("the candidate never led")
		}
		time.Sleep(time.Millisecond)
	}
}

func get(t *testing.T, u string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestMiddleware503(t *testing.T) {
	store := memlock.New()
	a := startInstance(t, store, "a")
	term := waitLeads(t, a.c)
	b := startInstance(t, store, "b", leader.WithRetryAfter(1500*time.Millisecond))

	if resp, body := get(t, a.srv.URL); resp.StatusCode != 200 || body != fmt.Sprintf("a %d", term.Token()) {
		t.Errorf("leader answered %d %q", resp.StatusCode, body)
	}
	resp, _ := get(t, b.srv.URL)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "2" || resp.Header.Get(leader.LeaderHeader) != "a" {
		t.Errorf("non-leader answered %d, Retry-After %q, leader %q; want 503, 2, a",
			resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get(leader.LeaderHeader))
	}
}

func TestMiddlewareForwards(t *testing.T) {
	store := memlock.New()
	urls := map[string]*url.URL{}
	urlOf := func(id string) (*url.URL, bool) { u, ok := urls[id]; return u, ok }
	a := startInstance(t, store, "a", leader.WithLeaderURL(urlOf))
	term := waitLeads(t, a.c)
	b := startInstance(t, store, "b", leader.WithLeaderURL(urlOf))
	urls["a"], _ = url.Parse(a.srv.URL)
	urls["b"], _ = url.Parse(b.srv.URL)

	if resp, body := get(t, b.srv.URL); resp.StatusCode != 200 || body != fmt.Sprintf("a %d", term.Token()) {
		t.Errorf("non-leader with the leader's URL answered %d %q, want the leader's answer", resp.StatusCode, body)
	}
	// A forwarded request that reaches a non-leader is not forwarded again.
	req, _ := http.NewRequest("GET", b.srv.URL, nil)
	req.Header.Set(leader.ForwardedHeader, "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a forwarded request at a non-leader got %d, want 503", resp.StatusCode)
	}
}
