package lockxd

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"

	"github.com/lockx-go/lockx/lockx"
)

// minSecretLen is the shortest owner a client may choose at acquire. The
// owner a client sends is the hold's secret: anyone who knows it operates
// the hold, so it must not be guessable. lockx.NewOwner makes 32 hex
// digits (128 random bits); 16 characters refuses the obvious "worker-1"
// without pretending to measure entropy.
const minSecretLen = 16

// Holder returns the label under which a hold with the given secret (the
// owner its acquirer sent, or was sent back) is kept in the backend, and
// shown by inspection: "h-" and 120 bits of SHA-256 over the tenant and
// the secret (20 base64url characters), then the secret's public part —
// whatever follows its first '~' at or after minSecretLen, such as the
// identity of a leader-election candidate (patterns/leader).
//
// A label is never a credential: every operation derives the backend
// owner from the secret it is given, so a client that presents a label it
// read from GET /v1/locks operates Holder(label), which holds nothing. No
// server state is involved, so a restarted lockxd, or a second instance
// over the same backend, derives the same label (docs/lockxd.md, "Hold
// secrets").
func Holder(tenant string, secret lockx.Owner) lockx.Owner {
	h := sha256.New()
	h.Write([]byte("lockxd holder\x00"))
	h.Write([]byte(tenant))
	h.Write([]byte{0})
	h.Write([]byte(secret))
	label := "h-" + base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:15])
	if i := strings.IndexByte(string(secret), '~'); i >= minSecretLen {
		label += string(secret[i:])
	}
	return lockx.Owner(label)
}

// holder is the backend owner of secret in tenant t.
func holder(t *tenant, secret string) lockx.Owner { return Holder(t.name, lockx.Owner(secret)) }

// checkSecret validates an owner a client chose for a new hold.
func checkSecret(name, owner string) error {
	if err := checkKey(name, owner, maxOwnerLen); err != nil {
		return err
	}
	if len(owner) < minSecretLen {
		return fmt.Errorf("%s is the hold's secret: at least %d characters, unguessable (e.g. 128 random bits), or omit it and use the one returned", name, minSecretLen)
	}
	return nil
}

// sign is the signature of a grant's token for key (as the tenant names
// it), or "" if the server does not sign.
func (t *tenant) sign(key string, tok lockx.Token) string {
	if t.signer == nil {
		return ""
	}
	return t.signer.Sign(key, tok)
}

// verify checks a fence request's signature when the server signs: 428
// without one, 403 for one the server did not make. A token above any the
// server issued for the resource cannot carry a valid signature, so it is
// refused before the fence store records it.
func (t *tenant) verify(resource string, tok lockx.Token, sig string) *httpError {
	if !t.signing {
		return nil
	}
	if sig == "" {
		return &httpError{status: http.StatusPreconditionRequired, code: "signature-required", title: "signed fencing token required", detail: "this server signs its tokens: send the grant's signature with the token"}
	}
	if t.signer == nil || t.signer.Verify(resource, tok, sig) != nil {
		return &httpError{status: http.StatusForbidden, code: "forged-token", title: "fencing token not issued by this server", detail: fmt.Sprintf("the signature does not match resource %q and token %d", resource, tok)}
	}
	return nil
}
