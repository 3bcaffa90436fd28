package lockx_test

import (
	"context"
	"errors"
	"testing"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
)

var signingKey = []byte("0123456789abcdef0123456789abcdef")

func TestTokenSigner(t *testing.T) {
	s, err := lockx.NewTokenSigner(signingKey)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := lockx.NewTokenSigner([]byte("another key of sixteen+ bytes"))
	sig := s.Sign("orders/42", 7)
	if len(sig) != 22 {
		t.Fatalf("signature %q: want 22 characters", sig)
	}
	if err := s.Verify("orders/42", 7, sig); err != nil {
		t.Fatalf("own signature: %v", err)
	}
	for _, c := range []struct {
		name, res, sig string
		tok            lockx.Token
	}{
		{"other token", "orders/42", sig, 8},
		{"highest token", "orders/42", sig, lockx.MaxToken},
		{"other resource", "orders/43", sig, 7},
		{"other key", "orders/42", other.Sign("orders/42", lockx.MaxToken), lockx.MaxToken},
		{"missing", "orders/42", "", 7},
		{"malformed", "orders/42", "not base64 at all!!!!!", 7},
		{"short", "orders/42", sig[:21], 7},
	} {
		err := s.Verify(c.res, c.tok, c.sig)
		var se *lockx.SignatureError
		if !errors.Is(err, lockx.ErrBadSignature) || !errors.As(err, &se) {
			t.Errorf("%s: %v, want ErrBadSignature", c.name, err)
		}
	}
	if _, err := lockx.NewTokenSigner([]byte("short")); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Fatalf("short key: %v", err)
	}
}

// A Client with WithTokenSigning gives each lock the signature of its
// token; without it, none.
func TestLockTokenSignature(t *testing.T) {
	ctx := context.Background()
	c := lockx.New(memlock.New(), lockx.WithTokenSigning(signingKey))
	defer c.Close()
	l, err := c.Acquire(ctx, "orders/42")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	s, _ := lockx.NewTokenSigner(signingKey)
	if err := s.Verify("orders/42", l.Token(), l.TokenSignature()); err != nil {
		t.Fatalf("lock's signature: %v", err)
	}
	plain := lockx.New(memlock.New())
	defer plain.Close()
	l2, err := plain.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Release(ctx)
	if l2.TokenSignature() != "" {
		t.Fatal("unsigned client gave a signature")
	}
	bad := lockx.New(memlock.New(), lockx.WithTokenSigning([]byte("short")))
	defer bad.Close()
	if _, err := bad.Acquire(ctx, "k"); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Fatalf("short signing key: %v", err)
	}
}

// FuzzVerify feeds arbitrary signatures, resources and tokens: Verify
// answers nil only for the real signature, and never panics.
func FuzzVerify(f *testing.F) {
	s, _ := lockx.NewTokenSigner(signingKey)
	f.Add("orders/42", uint64(7), s.Sign("orders/42", 7))
	f.Add("", uint64(0), "")
	f.Add("r", uint64(1<<63), "AAAAAAAAAAAAAAAAAAAAAA")
	f.Fuzz(func(t *testing.T, res string, tok uint64, sig string) {
		err := s.Verify(res, lockx.Token(tok), sig)
		if (err == nil) != (sig == s.Sign(res, lockx.Token(tok))) {
			t.Fatalf("Verify(%q, %d, %q) = %v", res, tok, sig, err)
		}
		if err != nil && !errors.Is(err, lockx.ErrBadSignature) {
			t.Fatalf("untyped error %v", err)
		}
	})
}

// BenchmarkVerify is the resource side's cost per request.
//
//	go test -run '^$' -bench Verify ./lockx/
func BenchmarkVerify(b *testing.B) {
	s, _ := lockx.NewTokenSigner(signingKey)
	sig := s.Sign("bench/orders/42", 123456789)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Verify("bench/orders/42", 123456789, sig); err != nil {
			b.Fatal(err)
		}
	}
}
