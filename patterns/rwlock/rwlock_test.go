package rwlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/patterns/rwlock"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// plainBackend implements only driver.Backend.
type plainBackend struct{ driver.Backend }

func TestUnsupportedBackend(t *testing.T) {
	c := lockx.New(plainBackend{})
	rw := rwlock.New(c)
	if _, err := rw.RLock(context.Background(), "k"); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("RLock on a backend without RWBackend = %v, want ErrUnsupported", err)
	}
	if _, err := rw.Lock(context.Background(), "k"); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Lock on a backend without RWBackend = %v, want ErrUnsupported", err)
	}
}

func TestDowngradeNil(t *testing.T) {
	if _, err := rwlock.New(nil).Downgrade(context.Background(), nil); !errors.Is(err, lockx.ErrNotHeld) {
		t.Fatalf("Downgrade(nil) = %v, want ErrNotHeld", err)
	}
}

func TestDoLost(t *testing.T) {
	b := memlock.New()
	c := lockx.New(b)
	defer c.Close()
	rw := rwlock.New(c)
	ctx := context.Background()
	err := rw.RDo(ctx, "k", func(fctx context.Context) error {
		owner, _ := lockx.OwnerFromContext(fctx)
		if err := b.ReleaseRW(ctx, driver.ModeRead, "k", owner); err != nil {
			return err
		}
		<-fctx.Done() // the renewer notices at its next renewal
		return context.Cause(fctx)
	}, lockx.WithWatchdog(150*time.Millisecond))
	if !errors.Is(err, lockx.ErrLost) {
		t.Fatalf("RDo with the lock taken away = %v, want ErrLost", err)
	}
	if err := rw.Do(ctx, "k", nil); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Fatalf("Do(nil) = %v, want *ArgError", err)
	}
	if err := rw.Do(ctx, "k", func(context.Context) error { return nil }); err != nil {
		t.Fatalf("Do = %v", err)
	}
}

// A plain lock and a write lock of the same key name are different locks: an
// owner holding the plain lock must not "re-enter" it when it asks for the
// write lock, or another owner could write-lock the key alongside it.
func TestWriteLockIsNotThePlainLock(t *testing.T) {
	c := lockx.New(memlock.New())
	defer c.Close()
	ctx := context.Background()
	plain, err := c.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Release(ctx)
	rw := rwlock.New(c)
	w, err := rw.Lock(plain.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release(ctx)
	if w.Token() == plain.Token() {
		t.Fatal("write lock shares the plain lock's hold")
	}
	if g, err := rw.TryLock(ctx, "k"); err == nil {
		_ = g.Release(ctx)
		t.Fatal("another owner write-locked a key that is write-locked")
	}
}
