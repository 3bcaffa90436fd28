package leader

import (
	"crypto/rand"
	"encoding/base64"

	"github.com/lockx-go/lockx/lockx"
)

// A candidate holds the election's lock under an owner id that carries its
// identity after 128 random bits (22 base64url characters and a '~'): the
// random part keeps the owner unguessable, so no other process can release
// or extend the leader's lock, and the identity lets every reader of the
// lock (an Inspector) name the leader without a record of its own.
const (
	randLen = 22
	sep     = '~'
)

func newOwner(identity string) lockx.Owner {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error (Go 1.24+)
	buf := make([]byte, 0, randLen+1+len(identity))
	buf = base64.RawURLEncoding.AppendEncode(buf, b[:])
	buf = append(buf, sep)
	buf = append(buf, identity...)
	return lockx.Owner(buf)
}

// identityOf returns the identity in an owner made by newOwner, or the
// whole owner for a lock taken outside this package.
func identityOf(o lockx.Owner) string {
	if len(o) > randLen+1 && o[randLen] == sep {
		return string(o[randLen+1:])
	}
	return string(o)
}
