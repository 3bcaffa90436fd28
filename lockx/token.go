package lockx

import (
	"strconv"

	"github.com/lockx-go/lockx/lockx/driver"
)

// Token is a fencing token: every change of ownership of a key yields a token
// strictly greater than every token issued earlier for that key. A resource
// that remembers the highest token it has seen per key and rejects lower ones
// turns a lock that may be lost (GC pause, partition, failover) into a
// correctness guarantee. Tokens of one key are comparable; tokens of
// different keys are not related. The zero Token is never issued.
type Token = driver.Token

// MaxToken is the largest token any lockx backend issues (2^53 − 1, so that
// a token survives a Lua or JSON number unchanged).
const MaxToken = driver.MaxToken

// ParseToken parses a decimal token as written by Token.String. It rejects
// empty input, signs, non-digits, zero and values above MaxToken with an
// *ArgError, so a token taken from a header or a form is safe to compare.
func ParseToken(s string) (Token, error) {
	if s == "" {
		return 0, &ArgError{Arg: "token", Reason: "empty"}
	}
	if len(s) > 20 {
		return 0, &ArgError{Arg: "token", Reason: "too long"}
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, &ArgError{Arg: "token", Reason: "not a decimal number"}
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v > uint64(MaxToken) {
		return 0, &ArgError{Arg: "token", Reason: "out of range"}
	}
	if v == 0 {
		return 0, &ArgError{Arg: "token", Reason: "zero"}
	}
	return Token(v), nil
}
