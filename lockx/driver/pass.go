package driver

import (
	"context"
	"time"
)

// Passer is implemented by backends that can hand a held lock from its
// holder straight to another owner in one atomic step. The Client uses it
// under lockx.LocalFirst: when a hold ends while another goroutine of the
// same Client waits in line for the key, the lock goes to that goroutine
// in one call instead of a Release and an Acquire.
type Passer interface {
	// Pass checks that from holds key and, if nobody waits for key at the
	// backend, makes to its holder for lease with a new fencing token:
	// larger than every token key had before, as a Release followed by
	// to's Acquire would issue. It returns that grant, as Acquire does.
	//
	// If others wait for key at the backend (a queue, a waiter mark), or
	// the backend declines for a reason of its own, Pass releases from's
	// lock exactly as Release does — handing it to the next in line —
	// and returns Result{Acquired: false}: to must then contend as usual.
	// If from does not hold key it returns ErrNotHeld and grants nothing.
	// Any other error matches ErrUnavailable: the outcome is unknown, and
	// key may be from's, to's or free.
	Pass(ctx context.Context, key string, from, to Owner, lease time.Duration) (Result, error)
}
