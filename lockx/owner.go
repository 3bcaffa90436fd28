package lockx

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"github.com/lockx-go/lockx/lockx/driver"
)

// Owner identifies a lock holder. Owners made by NewOwner are 128 random bits
// from crypto/rand in hex, so no other process can guess one and release or
// extend a lock it does not hold.
type Owner = driver.Owner

// NewOwner returns a fresh unguessable owner id (32 hex digits).
func NewOwner() Owner {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error (Go 1.24+)
	return Owner(hex.EncodeToString(b[:]))
}

type ownerKey struct{}

// ContextWithOwner returns a context that carries owner. Acquire with such a
// context acquires as that owner, and re-enters any lock that owner already
// holds on the same Client. Lock.Context carries its owner, so nested
// acquisitions under a held lock's context are reentrant without this call.
func ContextWithOwner(ctx context.Context, owner Owner) context.Context {
	return context.WithValue(ctx, ownerKey{}, owner)
}

// OwnerFromContext returns the owner carried by ctx, if any.
func OwnerFromContext(ctx context.Context) (Owner, bool) {
	o, ok := ctx.Value(ownerKey{}).(Owner)
	return o, ok && o != ""
}
