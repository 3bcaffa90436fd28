package mysqllock_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/mysqllock"
)

type inspectable interface {
	driver.Backend
	driver.Inspector
}

// TestInspect: both modes list exactly the live holds under a prefix, with
// owner and token, and forget a hold once it is released.
func TestInspect(t *testing.T) {
	for _, mode := range []struct {
		name string
		new  func(db *sql.DB, prefix string) inspectable
	}{
		{"Session", func(db *sql.DB, p string) inspectable {
			return mysqllock.New(db, fastOpts(p)...)
		}},
		{"Table", func(db *sql.DB, p string) inspectable {
			return mysqllock.NewTable(db, fastOpts(p)...)
		}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			db, prefix := openDB(t)
			b := mode.new(db, prefix)
			t.Cleanup(func() { _ = b.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if _, err := b.Lock(ctx, "p:a"); !errors.Is(err, lockx.ErrNotHeld) {
				t.Fatalf("Lock before any grant = %v, want ErrNotHeld", err)
			}
			tokens := map[string]lockx.Token{}
			for _, k := range []string{"p:a", "p:b", "q:c"} {
				res, err := b.Acquire(ctx, driver.Request{Key: k, Owner: lockx.Owner("o-" + k), Lease: 10 * time.Second})
				if err != nil || !res.Acquired {
					t.Fatalf("Acquire(%s) = %+v, %v", k, res, err)
				}
				tokens[k] = res.Token
			}
			var got []lockx.LockInfo
			if err := b.Locks(ctx, "p:", func(li lockx.LockInfo) bool { got = append(got, li); return true }); err != nil {
				t.Fatal(err)
			}
			if len(got) != 2 || got[0].Key != "p:a" || got[1].Key != "p:b" {
				t.Fatalf("Locks(p:) = %+v, want p:a and p:b", got)
			}
			for _, li := range got {
				if li.Owner != lockx.Owner("o-"+li.Key) || li.Token != tokens[li.Key] || li.TTL <= 0 || li.TTL > 10*time.Second {
					t.Errorf("Locks reported %+v, want owner o-%s token %d and a TTL within the lease", li, li.Key, tokens[li.Key])
				}
			}
			if err := b.Release(ctx, "p:a", "o-p:a"); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Lock(ctx, "p:a"); !errors.Is(err, lockx.ErrNotHeld) {
				t.Errorf("Lock after release = %v, want ErrNotHeld", err)
			}
			if li, err := b.Lock(ctx, "q:c"); err != nil || li.Token != tokens["q:c"] {
				t.Errorf("Lock(q:c) = %+v, %v", li, err)
			}
		})
	}
}
