package redislock

import "github.com/lockx-go/lockx/lockx"

// Owners are stored compactly: an owner made by lockx.NewOwner (32 lowercase
// hex digits) as its 16 bytes, which saves 16 bytes per held lock. Any other
// owner string keeps its bytes and gets a suffix that makes its encoding
// differ in length from 16 bytes, so the encoding is injective: two owners
// never share an encoding, and no owner encodes to the empty string, which
// marks a tombstone (a token without a holder).
//
//	32 lowercase hex digits  →  the 16 bytes they spell
//	any other, 15 bytes long →  owner + "\x02\x02"
//	any other                →  owner + "\x01"

// appendOwner appends the encoding of o to dst.
func appendOwner(dst []byte, o lockx.Owner) []byte {
	if len(o) == 32 {
		var raw [16]byte
		ok := true
		for i := 0; i < 16 && ok; i++ {
			hi, ok1 := unhex(o[2*i])
			lo, ok2 := unhex(o[2*i+1])
			raw[i], ok = hi<<4|lo, ok1 && ok2
		}
		if ok {
			return append(dst, raw[:]...)
		}
	}
	dst = append(dst, o...)
	if len(o) == 15 {
		return append(dst, 2, 2)
	}
	return append(dst, 1)
}

// encodeOwner returns the encoding of o.
func encodeOwner(o lockx.Owner) string {
	return string(appendOwner(make([]byte, 0, len(o)+2), o))
}

// decodeOwner inverts appendOwner.
func decodeOwner(e string) lockx.Owner {
	const digits = "0123456789abcdef"
	switch {
	case len(e) == 16:
		var b [32]byte
		for i := range 16 {
			b[2*i], b[2*i+1] = digits[e[i]>>4], digits[e[i]&15]
		}
		return lockx.Owner(b[:])
	case len(e) == 17 && e[15] == 2 && e[16] == 2:
		return lockx.Owner(e[:15])
	case len(e) > 0:
		return lockx.Owner(e[:len(e)-1])
	}
	return ""
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}
