package lockx_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
)

// FuzzKey feeds arbitrary keys to a Client over memlock: every key either
// yields a lock (non-empty, at most DefaultMaxKeyLen bytes, a valid token,
// releasable) or a typed error (*ArgError for an empty or oversized key),
// never a panic or an untyped error. Keys are opaque bytes: NUL, invalid
// UTF-8 and separators are accepted.
func FuzzKey(f *testing.F) {
	for _, s := range []string{"k", "", "orders/42", "lockx:{x}", "\x00", "\xff\xfe", "a b\nc",
		strings.Repeat("k", lockx.DefaultMaxKeyLen), strings.Repeat("k", lockx.DefaultMaxKeyLen+1), "键", "*", "?[]"} {
		f.Add(s)
	}
	c := lockx.New(memlock.New())
	f.Cleanup(func() { _ = c.Close() })
	f.Fuzz(func(t *testing.T, key string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		l, err := c.TryAcquire(ctx, key, lockx.WithLease(time.Minute))
		valid := key != "" && len(key) <= lockx.DefaultMaxKeyLen
		if !valid {
			var ae *lockx.ArgError
			if !errors.As(err, &ae) || !errors.Is(err, lockx.ErrInvalidArgument) || ae.Arg != "key" {
				t.Fatalf("TryAcquire(%d-byte key) = %v, %v; want *ArgError for key", len(key), l, err)
			}
			if l != nil {
				t.Fatalf("lock returned with an error")
			}
			return
		}
		if err != nil {
			t.Fatalf("TryAcquire(%q): %v", key, err)
		}
		if tok := l.Token(); tok == 0 || tok > lockx.MaxToken {
			t.Fatalf("token %d out of range", tok)
		}
		if p, err := lockx.ParseToken(l.Token().String()); err != nil || p != l.Token() {
			t.Fatalf("token %d does not round-trip: %d, %v", l.Token(), p, err)
		}
		// The same key is held: a second try is refused with ErrNotAcquired.
		if l2, err := c.TryAcquire(ctx, key); !errors.Is(err, lockx.ErrNotAcquired) {
			if l2 != nil {
				_ = l2.Release(ctx)
			}
			t.Fatalf("second TryAcquire(%q) = %v; want ErrNotAcquired", key, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("Release(%q): %v", key, err)
		}
		if err := driver.CheckResultArgs(key, time.Second); err != nil {
			t.Fatalf("CheckResultArgs(%q) rejects a key the client accepts: %v", key, err)
		}
	})
}

// FuzzOutcome decodes arbitrary bytes as a stored idempotency outcome (what
// redislock, pglock and memlock hand back from their ResultStore): a
// corrupt record is an error, never a panic, and whatever decodes
// re-encodes to a record that decodes to the same outcome.
func FuzzOutcome(f *testing.F) {
	good, _ := driver.Outcome{Fingerprint: []byte("fp"), Value: []byte(`{"id":7}`), Created: time.Unix(1700000000, 5).UTC()}.MarshalBinary()
	failed, _ := driver.Outcome{Failed: true, Err: "out of stock", Code: "stock"}.MarshalBinary()
	for _, b := range [][]byte{good, failed, nil, []byte("{}"), []byte("null"), []byte(`{"t":"not a time"}`),
		[]byte(`{"fp":"!!"}`), []byte(`{"f":1}`), []byte(`[`), []byte("\xff")} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var o driver.Outcome
		if err := o.UnmarshalBinary(b); err != nil {
			if !strings.HasPrefix(err.Error(), "lockx: corrupt stored outcome") {
				t.Fatalf("untyped decode error %v", err)
			}
			return
		}
		enc, err := o.MarshalBinary()
		if err != nil {
			// A decoded time outside what JSON can encode (year > 9999).
			return
		}
		var o2 driver.Outcome
		if err := o2.UnmarshalBinary(enc); err != nil {
			t.Fatalf("re-encoded outcome does not decode: %v\n%s", err, enc)
		}
		if !bytes.Equal(o.Fingerprint, o2.Fingerprint) || !bytes.Equal(o.Value, o2.Value) || o.Failed != o2.Failed ||
			o.Err != o2.Err || o.Code != o2.Code || !o.Created.Equal(o2.Created) {
			t.Fatalf("round trip changed the outcome: %+v → %+v", o, o2)
		}
	})
}
