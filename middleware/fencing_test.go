package middleware_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/middleware"
)

type failingStore struct{ err error }

func (s failingStore) Fence(context.Context, string, lockx.Token) error { return s.err }

func okHandler(w http.ResponseWriter, r *http.Request) {
	if f, ok := middleware.FenceFromContext(r.Context()); ok {
		w.Header().Set("X-Fenced", f.Resource+"@"+f.Token.String())
	}
	w.WriteHeader(http.StatusNoContent)
}

func serve(h http.Handler, method, target string, header http.Header) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, nil)
	for k, vs := range header {
		req.Header[k] = vs
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestFencingAnswers(t *testing.T) {
	store := memlock.NewFenceStore()
	if err := store.Fence(context.Background(), "r", 10); err != nil {
		t.Fatal(err)
	}
	h := middleware.Fencing(store)(http.HandlerFunc(okHandler))
	for _, tc := range []struct {
		name    string
		method  string
		header  http.Header
		status  int
		problem string // suffix of the problem type
		fenced  string
	}{
		{"read passes", "GET", nil, 204, "", ""},
		{"head passes", "HEAD", hdr("Fencing-Token", "garbage"), 204, "", ""},
		{"current token", "PUT", hdr("Lock-Key", "r", "Fencing-Token", "10"), 204, "", "r@10"},
		{"newer token", "POST", hdr("Lock-Key", "r", "Fencing-Token", "11"), 204, "", "r@11"},
		{"stale token", "DELETE", hdr("Lock-Key", "r", "Fencing-Token", "9"), 409, "stale-fencing-token", ""},
		{"other resource", "PATCH", hdr("Lock-Key", "s", "Fencing-Token", "1"), 204, "", "s@1"},
		{"missing both", "PUT", nil, 428, "fencing-token-required", ""},
		{"missing token", "PUT", hdr("Lock-Key", "r"), 428, "fencing-token-required", ""},
		{"missing key", "PUT", hdr("Fencing-Token", "12"), 428, "fencing-token-required", ""},
		{"custom method", "LOCK", nil, 428, "fencing-token-required", ""},
		{"zero token", "PUT", hdr("Lock-Key", "r", "Fencing-Token", "0"), 400, "malformed-fencing-header", ""},
		{"signed token", "PUT", hdr("Lock-Key", "r", "Fencing-Token", "+12"), 400, "malformed-fencing-header", ""},
		{"huge token", "PUT", hdr("Lock-Key", "r", "Fencing-Token", "9007199254740992"), 400, "malformed-fencing-header", ""},
		{"empty token", "PUT", hdr("Lock-Key", "r", "Fencing-Token", ""), 400, "malformed-fencing-header", ""},
		{"two tokens", "PUT", hdr("Lock-Key", "r", "Fencing-Token", "12", "Fencing-Token", "13"), 400, "malformed-fencing-header", ""},
		{"two keys", "PUT", hdr("Lock-Key", "r", "Lock-Key", "s", "Fencing-Token", "12"), 400, "malformed-fencing-header", ""},
		{"empty key", "PUT", hdr("Lock-Key", "", "Fencing-Token", "12"), 400, "malformed-lock-key", ""},
		{"long key", "PUT", hdr("Lock-Key", strings.Repeat("k", 513), "Fencing-Token", "12"), 400, "malformed-lock-key", ""},
		{"bad utf-8 key", "PUT", hdr("Lock-Key", "\xff", "Fencing-Token", "12"), 400, "malformed-lock-key", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := serve(h, tc.method, "/x", tc.header)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			if got := rec.Header().Get("X-Fenced"); got != tc.fenced {
				t.Errorf("handler saw fence %q, want %q", got, tc.fenced)
			}
			if tc.problem == "" {
				return
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("Content-Type %q", ct)
			}
			var p middleware.Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
				t.Fatalf("body %q: %v", rec.Body, err)
			}
			if !strings.HasSuffix(p.Type, "#"+tc.problem) || p.Status != tc.status || p.Title == "" {
				t.Errorf("problem %+v, want type …#%s", p, tc.problem)
			}
			if tc.status == 409 && (p.Token != 9 || p.Seen != 11 || p.Resource != "r") {
				t.Errorf("409 problem %+v, want both tokens", p)
			}
		})
	}
}

func TestFencingStoreFailureFailsClosed(t *testing.T) {
	called := false
	store := failingStore{driver.Unavailable("fence", errors.New("connection refused"))}
	h := middleware.Fencing(store)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true }))
	rec := serve(h, "PUT", "/", hdr("Lock-Key", "r", "Fencing-Token", "3"))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" || called {
		t.Fatalf("status %d, Retry-After %q, handler called %v", rec.Code, rec.Header().Get("Retry-After"), called)
	}
}

func TestFencingOptions(t *testing.T) {
	store := memlock.NewFenceStore()
	var gotErr error
	h := middleware.Fencing(store,
		middleware.WithMethods("POST"),
		middleware.WithKeyLookup("param:id"),
		middleware.WithTokenLookup("query:fence,header:X-Fence,cookie:fence"),
		middleware.Optional(),
		middleware.WithSkipper(func(r *http.Request) bool { return r.Header.Get("X-Skip") != "" }),
		middleware.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, err error) {
			gotErr = err
			w.WriteHeader(499)
		}),
	)(http.HandlerFunc(okHandler))
	mux := http.NewServeMux()
	mux.Handle("/acct/{id}", h)

	check := func(method, target string, header http.Header, status int, fenced string) {
		t.Helper()
		rec := serve(mux, method, target, header)
		if rec.Code != status || rec.Header().Get("X-Fenced") != fenced {
			t.Fatalf("%s %s: %d fenced %q, want %d %q", method, target, rec.Code, rec.Header().Get("X-Fenced"), status, fenced)
		}
	}
	check("POST", "/acct/7?fence=5", nil, 204, "7@5")
	check("POST", "/acct/7", hdr("X-Fence", "6"), 204, "7@6")
	check("POST", "/acct/7", hdr("Cookie", "fence=7"), 204, "7@7")
	check("PUT", "/acct/7?fence=1", nil, 204, "") // not a checked method
	check("POST", "/acct/7", hdr("X-Skip", "1"), 204, "")
	check("POST", "/acct/7?fence=4", nil, 499, "")
	var se *lockx.StaleTokenError
	if !errors.As(gotErr, &se) || se.Seen != 7 {
		t.Fatalf("ErrorHandler got %v, want the stale token error", gotErr)
	}
	var p *middleware.Problem
	if !errors.As(gotErr, &p) || p.Status != 409 {
		t.Fatalf("ErrorHandler got %v, want a *Problem", gotErr)
	}
	// A path parameter is always present, so the route requires a token
	// even with Optional: the key alone is a partial fence.
	check("POST", "/acct/7", nil, 499, "")
	if !errors.As(gotErr, &p) || p.Status != 428 {
		t.Fatalf("ErrorHandler got %v, want 428", gotErr)
	}
}

func TestFencingOptionalPassesUnfenced(t *testing.T) {
	h := middleware.Fencing(memlock.NewFenceStore(), middleware.Optional())(http.HandlerFunc(okHandler))
	if rec := serve(h, "PUT", "/", nil); rec.Code != 204 {
		t.Fatalf("status %d", rec.Code)
	}
	if rec := serve(h, "PUT", "/", hdr("Fencing-Token", "1")); rec.Code != 428 {
		t.Fatalf("partial fence: status %d", rec.Code)
	}
}

func TestFencingBadConfigPanics(t *testing.T) {
	for name, f := range map[string]func(){
		"nil store":    func() { middleware.Fencing(nil) },
		"bad lookup":   func() { middleware.Fencing(memlock.NewFenceStore(), middleware.WithTokenLookup("body:x")) },
		"empty lookup": func() { middleware.Fencing(memlock.NewFenceStore(), middleware.WithKeyLookup("")) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			f()
		})
	}
	if _, err := middleware.NewFenceChecker(memlock.NewFenceStore(), middleware.WithKeyLookup("header")); err == nil {
		t.Fatal("NewFenceChecker accepted a lookup without a name")
	}
}

func TestProblemHead(t *testing.T) {
	p := &middleware.Problem{Status: 423, Title: "Resource locked", RetryAfter: 1500 * 1e6}
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest("HEAD", "/", nil))
	if rec.Code != 423 || rec.Body.Len() != 0 || rec.Header().Get("Retry-After") != "2" {
		t.Fatalf("%d %q Retry-After %q", rec.Code, rec.Body, rec.Header().Get("Retry-After"))
	}
	if got := fmt.Sprint(p); !strings.Contains(got, "423 Resource locked") {
		t.Fatalf("Error() = %q", got)
	}
}
