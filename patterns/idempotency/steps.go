package idempotency

import (
	"context"

	"github.com/lockx-go/lockx/lockx"
)

// Step runs one phase of multi-step work at most once: Brandur's recovery
// points. The phase's outcome is stored under key+"#"+phase, so when the
// whole work is run again for key — after a crash, a lost lock, a retryable
// error in a later phase — completed phases return their stored results
// without running, and the work resumes at the first phase that has none.
//
//	receipt, err := lockx.IdempotentWith(ctx, g, key, func(ctx context.Context) (Receipt, error) {
//		charge, err := idempotency.Step(ctx, g, key, "charge", func(ctx context.Context) (Charge, error) {
//			return psp.Charge(ctx, amount, "charge-"+key) // downstream key derived from ours
//		})
//		if err != nil {
//			return Receipt{}, err
//		}
//		shipment, err := idempotency.Step(ctx, g, key, "ship", func(ctx context.Context) (Shipment, error) {
//			return warehouse.Ship(ctx, order)
//		})
//		...
//	})
//
// Draw phases as Brandur does: each call to an outside system is its own
// phase, and so is each group of local writes between two of them (use
// DoTx with key+"#"+phase for those, so the writes and the recovery point
// commit together). A phase's terminal error is stored like any outcome.
func Step[T any](ctx context.Context, g *Guard, key, phase string, fn func(context.Context) (T, error)) (T, error) {
	if g == nil {
		var zero T
		return zero, keyErr(key, &lockx.ArgError{Arg: "guard", Reason: "nil"})
	}
	return lockx.IdempotentWith(ctx, g, StepKey(key, phase), fn)
}

// StepKey returns the key under which phase of the work under key keeps its
// outcome: key+"#"+phase.
func StepKey(key, phase string) string { return key + "#" + phase }
