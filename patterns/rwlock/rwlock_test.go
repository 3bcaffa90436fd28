package rwlock_test

import (
	"context"
	"errors"
	"testing"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/patterns/rwlock"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// plainBackend implements only lockx.Backend.
type plainBackend struct{ lockx.Backend }

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
