package lockxd

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// tagLen is the length of a key tag with its separator: "#" and 16 hex
// digits (64 bits).
const tagLen = 17

// bkey is the backend key of a key the tenant names: its namespace, the
// key and, with a salt, a tag keyed by it. A backend that hashes keys
// (pglock maps them to 64-bit advisory-lock ids with FNV-1a, which is not
// keyed) lets whoever chooses names compute a collision with another
// tenant's key, and hold it to block that key. With the tag every backend
// key ends in 64 bits the tenant cannot compute, so it cannot aim at
// another key's hash.
func (t *tenant) bkey(key string) string {
	k := ns(t) + key
	if t.salt == nil {
		return k
	}
	m := hmac.New(sha256.New, t.salt)
	m.Write([]byte(k))
	return k + "#" + hex.EncodeToString(m.Sum(nil)[:8])
}

// visible is the key the tenant named, from its backend key.
func (t *tenant) visible(bk string) string {
	k := strings.TrimPrefix(bk, ns(t))
	if t.salt != nil && len(k) >= tagLen && k[len(k)-tagLen] == '#' {
		k = k[:len(k)-tagLen]
	}
	return k
}
