package semaphore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/patterns/semaphore"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// plainBackend implements only lockx.Backend.
type plainBackend struct{ lockx.Backend }

func TestUnsupportedBackend(t *testing.T) {
	sem := semaphore.New(lockx.New(plainBackend{}), "k", 1)
	if _, err := sem.Acquire(context.Background()); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Acquire on a backend without SemaphoreBackend = %v, want ErrUnsupported", err)
	}
	if _, err := sem.Usage(context.Background()); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Usage on a backend without SemaphoreBackend = %v, want ErrUnsupported", err)
	}
}
