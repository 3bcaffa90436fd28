// Package fencetest runs the Kleppmann scenario end to end over HTTP against
// any server that fences a document store, so that the net/http and Echo
// middleware and every FenceStore are held to the same test.
package fencetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/middleware"
)

// Docs is the protected resource: documents by id, in memory.
type Docs struct {
	mu sync.Mutex
	m  map[string]string
}

// NewDocs returns an empty document store.
func NewDocs() *Docs { return &Docs{m: make(map[string]string)} }

// Put stores body under id.
func (d *Docs) Put(id, body string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.m[id] = body
}

// Get returns the document id.
func (d *Docs) Get(id string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.m[id]
}

// NoopStore accepts every token: fencing switched off.
type NoopStore struct{}

// Fence implements driver.FenceStore by accepting everything.
func (NoopStore) Fence(context.Context, string, lockx.Token) error { return nil }

// Store names a FenceStore factory for the scenario.
type Store struct {
	Name string
	// New returns the store and, to have the same system issue the
	// scenario's tokens, a lock backend (nil: memlock).
	New func(t *testing.T) (driver.FenceStore, driver.Backend)
	// Protects is false for NoopStore: the scenario must then see the stale
	// write win, which proves that it really exercises the check.
	Protects bool
}

// Stores returns the in-process store and the no-op store, followed by
// extra (Redis, PostgreSQL …).
func Stores(extra ...Store) []Store {
	return append([]Store{
		{Name: "memlock", New: func(*testing.T) (driver.FenceStore, driver.Backend) { return memlock.NewFenceStore(), nil }, Protects: true},
		{Name: "noop", New: func(*testing.T) (driver.FenceStore, driver.Backend) { return NoopStore{}, nil }, Protects: false},
	}, extra...)
}

// Server builds the service under test: PUT /docs/{id} fenced by store,
// writing the request body into docs with the resource named by the
// Lock-Key header equal to "docs/{id}".
type Server func(store driver.FenceStore, docs *Docs) http.Handler

// Kleppmann runs the scenario of "How to do distributed locking" (2016)
// against each store:
//
//  1. Client A takes the lock with a short lease (token n) and starts its
//     write, but stalls after stamping it — a GC pause — past its lease.
//  2. Client B takes the lock (token n+1) and writes.
//  3. A wakes and its write reaches the server: 409, and the document keeps
//     B's write.
func Kleppmann(t *testing.T, server Server, stores []Store) {
	for _, st := range stores {
		t.Run(st.Name, func(t *testing.T) {
			docs := NewDocs()
			store, lb := st.New(t)
			srv := httptest.NewServer(server(store, docs))
			defer srv.Close()
			if lb == nil {
				lb = memlock.New()
			}
			// One Client for every try: its Close closes lb.
			locks := lockx.New(lb)
			defer locks.Close()
			// A must stamp its request before its lease runs out; on a
			// machine too busy for that, try again with a longer lease.
			for lease := 250 * time.Millisecond; !runKleppmann(t, srv.URL, docs, locks, lease, st.Protects); lease *= 4 {
				if lease >= 4*time.Second {
					t.Fatalf("A's lease of %v ran out before A could send its write", lease)
				}
				t.Logf("A's lease of %v ran out before A could send its write; retrying with a longer one", lease)
			}
		})
	}
}

// RandomID returns a fresh document id, so that persistent stores never see
// a resource from an earlier run.
func RandomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// stall is A's pause: it holds A's already stamped request until resumed.
type stall struct {
	base    http.RoundTripper
	stamped chan struct{}
	resume  chan struct{}
}

func (s *stall) RoundTrip(r *http.Request) (*http.Response, error) {
	close(s.stamped)
	<-s.resume
	return s.base.RoundTrip(r)
}

// runKleppmann runs the scenario once; it returns false, having checked
// nothing, if A's lease ran out before A's write got as far as its pause.
func runKleppmann(t *testing.T, url string, docs *Docs, locks *lockx.Client, lease time.Duration, protects bool) bool {
	ctx := context.Background()
	id := RandomID()
	key := "docs/" + id

	// A: short explicit lease, no watchdog — nothing will renew it.
	a, err := locks.Acquire(ctx, key, lockx.WithLease(lease))
	if err != nil {
		t.Fatal(err)
	}
	st := &stall{base: http.DefaultTransport, stamped: make(chan struct{}), resume: make(chan struct{})}
	aClient := &http.Client{Transport: &middleware.Transport{Base: st}}
	type result struct {
		status int
		body   string
		err    error
	}
	aDone := make(chan result, 1)
	go func() {
		status, body, err := put(lockx.ContextWithLock(ctx, a), aClient, url+"/docs/"+id, "written by A")
		aDone <- result{status, body, err}
	}()
	select {
	case <-st.stamped:
	case r := <-aDone:
		if !errors.Is(r.err, lockx.ErrLost) {
			t.Fatalf("A's write ended before its pause: %d %s %v", r.status, r.body, r.err)
		}
		return false // Transport refused: the lease ran out before A sent
	}
	<-a.Lost() // A's lease runs out during the pause

	b, err := locks.Acquire(ctx, key, lockx.WithWait(5*time.Second))
	if err != nil {
		t.Fatalf("B acquire: %v", err)
	}
	defer b.Release(ctx)
	if b.Token() <= a.Token() {
		t.Fatalf("B's token %d is not above A's %d", b.Token(), a.Token())
	}
	bClient := &http.Client{Transport: &middleware.Transport{}}
	status, body, err := put(lockx.ContextWithLock(ctx, b), bClient, url+"/docs/"+id, "written by B")
	if err != nil || status != http.StatusNoContent {
		t.Fatalf("B's write: %d %s %v", status, body, err)
	}

	close(st.resume) // A wakes up and its write goes out
	ra := <-aDone
	if ra.err != nil {
		t.Fatalf("A's write: %v", ra.err)
	}
	if !protects {
		if ra.status != http.StatusNoContent || docs.Get(id) != "written by A" {
			t.Fatalf("without fencing A's stale write should win: %d, document %q", ra.status, docs.Get(id))
		}
		return true
	}
	if ra.status != http.StatusConflict {
		t.Fatalf("A's stale write: status %d (%s), want 409", ra.status, ra.body)
	}
	var p struct {
		Status   int    `json:"status"`
		Resource string `json:"resource"`
		Token    uint64 `json:"token"`
		Seen     uint64 `json:"seen"`
	}
	if err := json.Unmarshal([]byte(ra.body), &p); err != nil {
		t.Fatalf("409 body %q: %v", ra.body, err)
	}
	if p.Status != 409 || p.Resource != key || p.Token != uint64(a.Token()) || p.Seen != uint64(b.Token()) {
		t.Fatalf("409 body %+v, want resource %q token %d seen %d", p, key, a.Token(), b.Token())
	}
	if got := docs.Get(id); got != "written by B" {
		t.Fatalf("document %q, want B's write", got)
	}
	_ = a.Release(ctx)
	return true
}

func put(ctx context.Context, c *http.Client, url, body string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
