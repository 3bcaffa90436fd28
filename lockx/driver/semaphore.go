package driver

import (
	"context"
	"time"
)

// PermitRequest is one attempt to take permits of a counting semaphore.
type PermitRequest struct {
	// Request names the semaphore (Key), the permit's Owner and Lease, and
	// the waiting mode. With Fair the attempt is granted only at the head
	// of the semaphore's queue, so a large request is not starved by a
	// stream of small ones; with Wait a refused attempt enqueues Owner.
	Request
	// Limit is the semaphore's capacity as the caller knows it. The grant
	// checks the permits in use against it, so lowering it revokes nothing:
	// it only stops new grants until usage has dropped below it.
	Limit int64
	// Count is how many permits the owner takes at once (weighted
	// acquisition), 1 ≤ Count ≤ Limit.
	Count int64
}

// CheckPermitRequest checks the part of a PermitRequest that is a
// semaphore's own — 1 ≤ Count ≤ Limit — so that every SemaphoreBackend
// refuses other input with the same *ArgError.
func CheckPermitRequest(req PermitRequest) error {
	switch {
	case req.Limit <= 0:
		return &ArgError{Arg: "limit", Reason: "must be positive"}
	case req.Count <= 0:
		return &ArgError{Arg: "permits", Reason: "must be positive"}
	case req.Count > req.Limit:
		return &ArgError{Arg: "permits", Reason: "more than the limit"}
	}
	return nil
}

// PermitUsage is a snapshot of a semaphore.
type PermitUsage struct {
	InUse   int64 // permits held by live leases
	Holders int64 // owners holding them
	Waiting int64 // owners queued for permits
}

// SemaphoreBackend is the optional capability of a Backend that serves
// counting semaphores (patterns/semaphore). A semaphore key is its own
// namespace: it does not conflict with a lock of the same name.
//
// Permits are leases: each owner's permits expire with its lease unless
// extended, so a crashed holder returns its permits on its own. Only the
// owner can extend or release its permits.
//
// AcquirePermits grants req.Count permits to req.Owner when the permits held
// by live leases plus req.Count — plus, if req.Fair, the counts of the live
// requests queued ahead of req.Owner — do not exceed req.Limit. So a fair
// request never overtakes one that arrived earlier, and the whole prefix of
// the queue that fits can enter at once. It is idempotent per owner: a holder's
// repeat resets its lease and returns its token. Every grant gets a new token,
// strictly increasing per key, which identifies the permit.
//
// A Backend that also implements Notifier wakes waiters through Watch on the
// same key string: a release wakes the queued owners whose requests now fit,
// in queue order.
type SemaphoreBackend interface {
	AcquirePermits(ctx context.Context, req PermitRequest) (Result, error)
	// ExtendPermits resets the lease of owner's permits, or returns ErrNotHeld.
	ExtendPermits(ctx context.Context, key string, owner Owner, lease time.Duration) error
	// ReleasePermits returns owner's permits and withdraws owner from the
	// queue. It returns ErrNotHeld if owner held none.
	ReleasePermits(ctx context.Context, key string, owner Owner) error
	// Permits reports the semaphore's usage, after dropping expired leases.
	Permits(ctx context.Context, key string) (PermitUsage, error)
}
