package semaphore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/patterns/semaphore"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// plainBackend implements only driver.Backend.
type plainBackend struct{ driver.Backend }

func TestUnsupportedBackend(t *testing.T) {
	sem := semaphore.New(lockx.New(plainBackend{}), "k", 1)
	if _, err := sem.Acquire(context.Background()); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Acquire on a backend without SemaphoreBackend = %v, want ErrUnsupported", err)
	}
	if _, err := sem.Usage(context.Background()); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Usage on a backend without SemaphoreBackend = %v, want ErrUnsupported", err)
	}
}

func TestDoLost(t *testing.T) {
	b := memlock.New()
	c := lockx.New(b)
	defer c.Close()
	sem := semaphore.New(c, "k", 2)
	ctx := context.Background()
	err := sem.Do(ctx, func(fctx context.Context) error {
		owner, _ := lockx.OwnerFromContext(fctx)
		if err := b.ReleasePermits(ctx, "k", owner); err != nil {
			return err
		}
		<-fctx.Done()
		return context.Cause(fctx)
	}, lockx.WithWatchdog(150*time.Millisecond))
	if !errors.Is(err, lockx.ErrLost) {
		t.Fatalf("Do with the permit taken away = %v, want ErrLost", err)
	}
	if err := sem.Do(ctx, nil); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Fatalf("Do(nil) = %v, want *ArgError", err)
	}
}
