package lockx

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"sync"
)

// MinSigningKeyLen is the shortest key NewTokenSigner accepts: 128 bits.
const MinSigningKeyLen = 16

// signatureLen is the length of a signature as text: 128 bits of
// HMAC-SHA256, unpadded base64url.
const signatureLen = 22

// ErrBadSignature reports a fencing token whose signature is missing,
// malformed or not made with the resource's key: a token the lock side did
// not issue for that resource. Errors of TokenSigner.Verify match it.
var ErrBadSignature = errors.New("lockx: fencing token signature missing or invalid")

// SignatureError is the error of a refused signature: Reason is "missing",
// "malformed" or "does not match".
type SignatureError struct {
	Resource string
	Token    Token
	Reason   string
}

func (e *SignatureError) Error() string {
	return fmt.Sprintf("lockx: token %d for %q: signature %s", e.Token, e.Resource, e.Reason)
}

// Is makes errors.Is(err, ErrBadSignature) true for every *SignatureError.
func (e *SignatureError) Is(target error) bool { return target == ErrBadSignature }

// TokenSigner signs fencing tokens on the lock side and verifies them on
// the resource side, with a key the two share and nobody else has. The
// signature is HMAC-SHA256 over the resource (the lock key) and the
// token, truncated to 128 bits: a caller without the key cannot make a
// token the resource accepts, so it cannot push the resource's fence to a
// token no lock holder was given (docs/fencing.md, "Signed tokens"). It is
// safe for concurrent use.
type TokenSigner struct {
	pool sync.Pool // of hash.Hash: HMAC keyed once, Reset between uses
}

// NewTokenSigner returns a signer with key, at least MinSigningKeyLen
// random bytes (an *ArgError otherwise). The key is copied.
func NewTokenSigner(key []byte) (*TokenSigner, error) {
	if len(key) < MinSigningKeyLen {
		return nil, &ArgError{Arg: "signing key", Reason: fmt.Sprintf("%d bytes, want at least %d", len(key), MinSigningKeyLen)}
	}
	k := append([]byte(nil), key...)
	s := &TokenSigner{}
	s.pool.New = func() any { return hmac.New(sha256.New, k) }
	return s, nil
}

// mac computes the signature bytes of (resource, token) into dst.
func (s *TokenSigner) mac(dst []byte, resource string, t Token) []byte {
	h := s.pool.Get().(hash.Hash)
	h.Reset()
	var buf [64]byte
	b := append(buf[:0], "lockx-fence-v1\x00"...)
	b = strconv.AppendUint(b, uint64(t), 10)
	b = append(b, 0)
	h.Write(b)
	h.Write([]byte(resource))
	dst = h.Sum(dst)
	s.pool.Put(h)
	return dst
}

// Sign returns the signature of token t for resource, as text (22
// characters of base64url) for a header or a JSON field.
func (s *TokenSigner) Sign(resource string, t Token) string {
	var sum [sha256.Size]byte
	m := s.mac(sum[:0], resource, t)
	return base64.RawURLEncoding.EncodeToString(m[:16])
}

// Verify checks that sig is the signature of t for resource. A mismatch,
// a malformed or an empty sig is a *SignatureError matching
// ErrBadSignature. The comparison takes constant time.
func (s *TokenSigner) Verify(resource string, t Token, sig string) error {
	if sig == "" {
		return &SignatureError{Resource: resource, Token: t, Reason: "missing"}
	}
	var got [18]byte // 22 base64url characters decode to 16 bytes
	if len(sig) != signatureLen {
		return &SignatureError{Resource: resource, Token: t, Reason: "malformed"}
	}
	n, err := base64.RawURLEncoding.Strict().Decode(got[:], []byte(sig))
	if err != nil || n != 16 {
		return &SignatureError{Resource: resource, Token: t, Reason: "malformed"}
	}
	var sum [sha256.Size]byte
	if !hmac.Equal(s.mac(sum[:0], resource, t)[:16], got[:16]) {
		return &SignatureError{Resource: resource, Token: t, Reason: "does not match"}
	}
	return nil
}

// WithTokenSigning makes a Client sign the fencing token of every lock it
// grants with key (see TokenSigner): Lock.TokenSignature returns the
// signature, and middleware.Transport sends it beside the token. Give the
// same key to the resources (middleware.WithTokenVerification), and to
// nobody else. Given to New; a key shorter than MinSigningKeyLen makes
// every call fail with an *ArgError.
func WithTokenSigning(key []byte) Option {
	s, err := NewTokenSigner(key)
	return func(c *config) {
		if err != nil {
			c.fail("signing key", err.(*ArgError).Reason)
			return
		}
		c.signer = s
	}
}

// TokenSignature returns the signature of the lock's fencing token for its
// key: the one the backend returned with the grant (a signing lockxd), or
// else the Client's own (WithTokenSigning); "" if neither signs.
func (l *Lock) TokenSignature() string {
	switch {
	case l == nil || l.h == nil:
		return ""
	case l.h.sig != "":
		return l.h.sig
	case l.h.c == nil || l.h.c.cfg.signer == nil:
		return ""
	}
	return l.h.c.cfg.signer.Sign(l.h.key, l.h.token)
}
