package lockx_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/lockx-go/lockx/lockx"
)

func TestParseToken(t *testing.T) {
	good := map[string]lockx.Token{"1": 1, "42": 42, "9007199254740991": lockx.MaxToken}
	for s, want := range good {
		got, err := lockx.ParseToken(s)
		if err != nil || got != want {
			t.Errorf("ParseToken(%q) = %d, %v; want %d", s, got, err, want)
		}
		if got.String() != s {
			t.Errorf("Token(%d).String() = %q", got, got.String())
		}
	}
	bad := []string{"", "0", "-1", "+1", " 1", "1 ", "1e3", "0x10", "9007199254740992", "18446744073709551616", "99999999999999999999999", "١"}
	for _, s := range bad {
		if _, err := lockx.ParseToken(s); !errors.Is(err, lockx.ErrInvalidArgument) {
			t.Errorf("ParseToken(%q) err = %v, want ErrInvalidArgument", s, err)
		}
	}
}

func FuzzParseToken(f *testing.F) {
	for _, s := range []string{"1", "0", "9007199254740991", "9007199254740992", "-5", "abc", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := lockx.ParseToken(s)
		if err != nil {
			if !errors.Is(err, lockx.ErrInvalidArgument) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if tok == 0 || tok > lockx.MaxToken {
			t.Fatalf("accepted out-of-range token %d from %q", tok, s)
		}
		if n, perr := strconv.ParseUint(s, 10, 64); perr != nil || lockx.Token(n) != tok {
			t.Fatalf("ParseToken(%q) = %d disagrees with strconv", s, tok)
		}
	})
}
