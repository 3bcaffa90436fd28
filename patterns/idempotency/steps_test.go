package idempotency_test

import (
	"context"
	"errors"
	"testing"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/patterns/idempotency"
)

// TestStepsResume: a failure in the second phase (retryable: the process
// "crashed" there) leaves the first phase's recovery point; the retry skips
// the first phase and finishes the work.
func TestStepsResume(t *testing.T) {
	g, _ := newGuard(t)
	ctx := context.Background()
	charges, ships := 0, 0
	crash := true
	work := func(ctx context.Context) (string, error) {
		c, err := idempotency.Step(ctx, g, "order:1", "charge", func(context.Context) (string, error) {
			charges++
			return "ch_1", nil
		})
		if err != nil {
			return "", err
		}
		s, err := idempotency.Step(ctx, g, "order:1", "ship", func(context.Context) (string, error) {
			ships++
			if crash {
				return "", idempotency.Retry(errors.New("warehouse timeout"))
			}
			return "sh_1", nil
		})
		if err != nil {
			return "", err
		}
		return c + "/" + s, nil
	}
	if _, err := lockx.IdempotentWith(ctx, g, "order:1", work); err == nil {
		t.Fatal("first attempt succeeded")
	}
	crash = false
	got, err := lockx.IdempotentWith(ctx, g, "order:1", work)
	if err != nil || got != "ch_1/sh_1" || charges != 1 || ships != 2 {
		t.Fatalf("retry: %q %v charges=%d ships=%d; want ch_1/sh_1 with one charge", got, err, charges, ships)
	}
	if got, _ := lockx.IdempotentWith(ctx, g, "order:1", work); got != "ch_1/sh_1" || charges != 1 || ships != 2 {
		t.Fatalf("replay ran phases again: charges=%d ships=%d", charges, ships)
	}
	if _, err := idempotency.Step[int](ctx, nil, "k", "p", nil); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Fatalf("nil guard: %v", err)
	}
	if idempotency.StepKey("a", "b") != "a#b" {
		t.Fatal("StepKey")
	}
}
