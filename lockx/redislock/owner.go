package redislock

import (
	"github.com/lockx-go/lockx/lockx/driver"
)

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
func appendOwner(dst []byte, o driver.Owner) []byte {
	if len(o) == 32 {
		var raw [16]byte
		bad := byte(0)
		for i := range raw {
			hi, lo := hexVal[o[2*i]], hexVal[o[2*i+1]]
			bad |= hi | lo
			raw[i] = hi<<4 | lo&15
		}
		if bad&0x10 == 0 {
			return append(dst, raw[:]...)
		}
	}
	dst = append(dst, o...)
	if len(o) == 15 {
		return append(dst, 2, 2)
	}
	return append(dst, 1)
}

// hexVal maps a lowercase hex digit to its value and every other byte to
// 0x10, a bit no digit's value has: one table read per digit on the hot
// path instead of two range tests.
var hexVal = func() (t [256]byte) {
	for c := range t {
		switch {
		case '0' <= c && c <= '9':
			t[c] = byte(c - '0')
		case 'a' <= c && c <= 'f':
			t[c] = byte(c - 'a' + 10)
		default:
			t[c] = 0x10
		}
	}
	return t
}()

// encodeOwner returns the encoding of o.
func encodeOwner(o driver.Owner) string {
	return string(appendOwner(make([]byte, 0, len(o)+2), o))
}

// decodeOwner inverts appendOwner.
func decodeOwner(e string) driver.Owner {
	const digits = "0123456789abcdef"
	switch {
	case len(e) == 16:
		var b [32]byte
		for i := range 16 {
			b[2*i], b[2*i+1] = digits[e[i]>>4], digits[e[i]&15]
		}
		return driver.Owner(b[:])
	case len(e) == 17 && e[15] == 2 && e[16] == 2:
		return driver.Owner(e[:15])
	case len(e) > 0:
		return driver.Owner(e[:len(e)-1])
	}
	return ""
}
