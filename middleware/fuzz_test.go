package middleware_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/middleware"
)

// FuzzParseFencingHeaders throws arbitrary key and token values — in
// headers, the query and cookies, once or twice — at Fencing: it must never
// panic, never answer 5xx, and answer every refusal with a problem body.
func FuzzParseFencingHeaders(f *testing.F) {
	for _, s := range [][3]string{
		{"r", "1", ""}, {"r", "9007199254740991", ""}, {"r", "9007199254740992", ""},
		{"", "", ""}, {"r", "-1", ""}, {"r", "0x10", ""}, {"r", " 7", ""}, {"\x00", "1", ""},
		{"r", "1", "2"}, {"r\xff", "18446744073709551616", ""}, {"a,b", "1,2", ""},
	} {
		f.Add(s[0], s[1], s[2], uint8(0))
	}
	store := memlock.NewFenceStore()
	h := middleware.Fencing(store, middleware.WithTokenLookup("header:Fencing-Token,query:t,cookie:t"))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	f.Fuzz(func(t *testing.T, key, token, token2 string, where uint8) {
		req := httptest.NewRequest("PUT", "/", nil)
		req.Header["Lock-Key"] = []string{key}
		switch where % 4 {
		case 0:
			req.Header["Fencing-Token"] = []string{token}
		case 1:
			req.Header["Fencing-Token"] = []string{token, token2}
		case 2:
			req.URL.RawQuery = url.Values{"t": {token}}.Encode()
		case 3:
			req.Header["Cookie"] = []string{"t=" + token}
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("key %q token %q: status %d", key, token, rec.Code)
		}
		if rec.Code != http.StatusNoContent {
			var p middleware.Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Status != rec.Code {
				t.Fatalf("key %q token %q: %d with body %q", key, token, rec.Code, rec.Body)
			}
		}
	})
}

// FuzzSignedFencingHeaders throws arbitrary keys, tokens and signatures at
// Fencing with WithTokenVerification: only the lock side's signature of
// the very key and token passes; everything else is a 4xx problem, and a
// refused request never moves the fence.
func FuzzSignedFencingHeaders(f *testing.F) {
	signer, _ := lockx.NewTokenSigner(signingKey)
	f.Add("r", "7", signer.Sign("r", 7))
	f.Add("r", "9007199254740991", "")
	f.Add("r", "8", signer.Sign("r", 7))
	f.Add("r", "1", "AAAAAAAAAAAAAAAAAAAAAA")
	f.Add("r", "1", "AAAAAAAAAAAAAAAAAAAAAB")
	f.Add("\xff", "1", "??")
	f.Fuzz(func(t *testing.T, key, token, sig string) {
		store := memlock.NewFenceStore()
		h := middleware.Fencing(store, middleware.WithTokenVerification(signingKey))(
			http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
		req := httptest.NewRequest("PUT", "/", nil)
		req.Header["Lock-Key"] = []string{key}
		req.Header["Fencing-Token"] = []string{token}
		req.Header[middleware.HeaderTokenSignature] = []string{sig}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		tok, perr := lockx.ParseToken(token)
		genuine := perr == nil && sig == signer.Sign(key, tok)
		if rec.Code == http.StatusNoContent && !genuine {
			t.Fatalf("key %q token %q sig %q: accepted without the lock side's signature", key, token, sig)
		}
		if rec.Code >= 500 {
			t.Fatalf("key %q token %q: status %d", key, token, rec.Code)
		}
		if rec.Code != http.StatusNoContent {
			var p middleware.Problem
			if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil || p.Status != rec.Code {
				t.Fatalf("key %q token %q: %d with body %q", key, token, rec.Code, rec.Body)
			}
			if err := store.Fence(context.Background(), "r", 1); err != nil && key == "r" {
				t.Fatalf("a refused request moved the fence: %v", err)
			}
		}
	})
}
