package lockx_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
)

// TestCloseRacesLocalFirstRelease runs a LocalFirst lock's final Release
// and its client's Close at once. Both end the hold, and the hold's
// LocalFirst gate must be left exactly once: left twice, the second leave
// waits for ever on the emptied gate (and -race reports the two writers).
func TestCloseRacesLocalFirstRelease(t *testing.T) {
	ctx := context.Background()
	for i := 0; i < 300; i++ {
		c := lockx.New(memlock.New())
		l, err := c.Acquire(ctx, "k", lockx.LocalFirst())
		if err != nil {
			t.Fatal(err)
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { <-start; _ = l.Release(ctx) })
		wg.Go(func() { <-start; _ = c.Close() })
		close(start)
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("round %d: Release and Close still running after 5 s", i)
		}
	}
}
