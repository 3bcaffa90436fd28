package middleware_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/middleware"
)

var signingKey = []byte("resource-and-lock-side-shared-key")

// The attack: a caller that holds no lock sends the highest token there is.
// Unverified, the resource accepts it and then refuses every real holder
// for good (a fence never goes down). With verification, the forged,
// the unsigned and the wrongly signed tokens are refused with a
// problem+json answer, the real holder's signed token passes, and the
// fence has not moved.
func TestSignedTokensRefuseForgery(t *testing.T) {
	ctx := context.Background()
	store := memlock.NewFenceStore()
	h := middleware.Fencing(store, middleware.WithTokenVerification(signingKey))(http.HandlerFunc(okHandler))
	lockSide := lockx.New(memlock.New(), lockx.WithTokenSigning(signingKey))
	defer lockSide.Close()
	l, err := lockSide.Acquire(ctx, "docs/1")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)

	attacker, _ := lockx.NewTokenSigner([]byte("a key the attacker made up"))
	for _, c := range []struct {
		name   string
		header http.Header
		status int
		kind   string
	}{
		{"unsigned max token", hdr("Lock-Key", "docs/1", "Fencing-Token", lockx.MaxToken.String()), 428, "signed-fencing-token-required"},
		{"forged signature", hdr("Lock-Key", "docs/1", "Fencing-Token", lockx.MaxToken.String(), middleware.HeaderTokenSignature, attacker.Sign("docs/1", lockx.MaxToken)), 403, "forged-fencing-token"},
		{"real signature, raised token", hdr("Lock-Key", "docs/1", "Fencing-Token", (l.Token() + 1000).String(), middleware.HeaderTokenSignature, l.TokenSignature()), 403, "forged-fencing-token"},
		{"real signature, other resource", hdr("Lock-Key", "docs/2", "Fencing-Token", l.Token().String(), middleware.HeaderTokenSignature, l.TokenSignature()), 403, "forged-fencing-token"},
		{"garbage signature", hdr("Lock-Key", "docs/1", "Fencing-Token", "5", middleware.HeaderTokenSignature, "!!"), 403, "forged-fencing-token"},
	} {
		rec := serve(h, "PUT", "/docs/1", c.header)
		var p middleware.Problem
		_ = json.Unmarshal(rec.Body.Bytes(), &p)
		if rec.Code != c.status || rec.Header().Get("Content-Type") != "application/problem+json" || !strings.HasSuffix(p.Type, "#"+c.kind) {
			t.Errorf("%s: %d %s %s, want %d %s", c.name, rec.Code, rec.Header().Get("Content-Type"), rec.Body, c.status, c.kind)
		}
	}
	// The real holder passes: nothing above its token was recorded.
	rec := serve(h, "PUT", "/docs/1", hdr("Lock-Key", "docs/1", "Fencing-Token", l.Token().String(), middleware.HeaderTokenSignature, l.TokenSignature()))
	if rec.Code != http.StatusNoContent {
		t.Fatalf("the holder's signed token: %d %s", rec.Code, rec.Body)
	}
	// Transport stamps the signature beside the token.
	var got http.Header
	tr := &middleware.Transport{Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = r.Header
		return &http.Response{StatusCode: 204, Body: http.NoBody, Request: r}, nil
	})}
	req, _ := http.NewRequestWithContext(lockx.ContextWithLock(ctx, l), "PUT", "http://svc/docs/1", nil)
	if _, err := tr.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if got.Get(middleware.HeaderTokenSignature) != l.TokenSignature() {
		t.Fatalf("Transport sent %v", got)
	}
	// Without the option, unsigned tokens keep working.
	plain := middleware.Fencing(memlock.NewFenceStore())(http.HandlerFunc(okHandler))
	if rec := serve(plain, "PUT", "/docs/1", hdr("Lock-Key", "docs/1", "Fencing-Token", "5")); rec.Code != http.StatusNoContent {
		t.Fatalf("unsigned token without verification: %d", rec.Code)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
