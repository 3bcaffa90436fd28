package driver

import "strconv"

// Token is a fencing token: every change of ownership of a key yields a token
// strictly greater than every token issued earlier for that key. A resource
// that remembers the highest token it has seen per key and rejects lower ones
// turns a lock that may be lost (GC pause, partition, failover) into a
// correctness guarantee.
//
// Tokens of one key are comparable; tokens of different keys are not related.
// The zero Token is never issued.
type Token uint64

// MaxToken is the largest token any lockx backend issues. Backends keep tokens
// below 2^53 so that they survive a round trip through a Lua number or a JSON
// number unchanged.
const MaxToken Token = 1<<53 - 1

// String returns the token in decimal.
func (t Token) String() string { return strconv.FormatUint(uint64(t), 10) }

// Valid reports whether t could have been issued: 1 ≤ t ≤ MaxToken.
func (t Token) Valid() bool { return t > 0 && t <= MaxToken }

// Owner identifies a lock holder: an opaque string, unguessable when made by
// lockx.NewOwner. Backends store it and compare it; they never parse it.
type Owner string

// MaxKeyLen is the longest key, resource, SKU or result key the Check*
// helpers accept, in bytes; lockx.DefaultMaxKeyLen is the same value.
const MaxKeyLen = 512
