package driver

import (
	"context"
	"time"
)

// Backend is the small interface a storage system implements to serve locks,
// in the spirit of database/sql/driver. The Client adds everything else on
// top — waiting, the watchdog, reentrancy, local queuing, validation — so a
// backend only has to make these operations atomic on its store.
//
// Optional capabilities (Notifier, BatchExtender, ExtendPartitioner, and the pattern
// capabilities) are further interfaces a backend may implement; the Client
// discovers them with As, which wrappers take part in.
//
// Every method must be safe for concurrent use. Errors other than the
// verdicts named below must match ErrUnavailable (see Unavailable): the
// Client treats them as "outcome unknown" and never as a grant.
type Backend interface {
	// Acquire makes one attempt to grant req.Key to req.Owner for req.Lease.
	//
	// It is idempotent per owner: if req.Owner already holds the key, the
	// lease is reset to req.Lease and the same token is returned. That makes
	// a retry after a lost reply safe.
	//
	// A refused attempt is not an error: it returns Result{Acquired: false}
	// with TTL set to the holder's remaining lease when the backend knows it.
	Acquire(ctx context.Context, req Request) (Result, error)

	// Extend resets the lease of a key held by owner to lease. It returns
	// ErrNotHeld if owner does not hold key.
	Extend(ctx context.Context, key string, owner Owner, lease time.Duration) error

	// Release frees key if owner holds it, and withdraws owner from the key's
	// fair queue if it waits there. It returns ErrNotHeld if owner did not
	// hold key; it never frees another owner's lock.
	Release(ctx context.Context, key string, owner Owner) error

	// TTL returns the remaining lease of key held by owner, or ErrNotHeld.
	TTL(ctx context.Context, key string, owner Owner) (time.Duration, error)

	// Close releases the backend's own resources (subscriptions, pinned
	// connections). It does not close clients the user passed in.
	Close() error
}

// Request is one acquisition attempt.
type Request struct {
	Key   string
	Owner Owner
	Lease time.Duration
	// Fair asks for FIFO order among waiters: the attempt enqueues Owner if
	// the key is held or others wait ahead, and is granted only at the head.
	Fair bool
	// Wait tells the backend that the caller will wait for a wake-up if the
	// attempt is refused, so a Notifier backend records it as a waiter.
	Wait bool
	// QueueTTL bounds how long a fair-queue entry survives without being
	// refreshed by another attempt, so a crashed waiter cannot stall the
	// queue. Zero means the backend's default.
	QueueTTL time.Duration
	// Renewed says the holder's watchdog will renew the lease (at a third of
	// the granted TTL), so the backend may grant a shorter first lease than
	// Lease — as a direct fair handoff does. Without it the grant must carry
	// the full Lease.
	Renewed bool
}

// Result is the outcome of one acquisition attempt.
type Result struct {
	Acquired bool
	// Token is the fencing token of the grant (Acquired only).
	Token Token
	// TTL is the granted lease when Acquired, else the current holder's
	// remaining lease if known (0 if unknown).
	TTL time.Duration
	// Signature is the lock service's signature of Token for the key
	// (TokenSigner), from a backend that is a service signing its grants
	// (lockxd with a signing key, through lockx/httplock); "" otherwise.
	Signature string
	// Queued, on a refusal of a waiting attempt, promises that the attempt
	// left the request queued at the backend and that every wake-up owed to
	// it from then on (a handoff, a release) reaches a Notifier watch the
	// caller registers after this reply. The caller then waits at once,
	// instead of registering and trying again to cover a release between
	// the refusal and the watch. A backend that cannot promise it leaves it
	// false.
	Queued bool
}

// Notifier is implemented by backends that wake waiters when a key is
// released, instead of leaving them to poll.
type Notifier interface {
	// Watch registers owner's interest in key before an attempt whose refusal the
	// caller will wait on, so no release between the attempt and the wait is
	// missed. The returned channel receives a value when key may be free; the
	// caller must call cancel when done waiting. Watch may block until the
	// backend's subscription is established, bounded by ctx. A fair release
	// wakes only the owner at the head of the queue; a plain release wakes
	// every watcher of the key.
	Watch(ctx context.Context, key string, owner Owner) (wake <-chan struct{}, cancel func(), err error)
}

// ExtendRequest is one lease renewal in a batch.
type ExtendRequest struct {
	Key   string
	Owner Owner
	Lease time.Duration
}

// BatchExtender is implemented by backends that can renew many leases in one
// round trip. The watchdog uses it to renew all of a client's due locks at
// once. The watchdog's loop does not wait for the call: it runs in a
// goroutine of its own, and the locks it renews are left out of later
// renewals until it returns.
type BatchExtender interface {
	// ExtendMany renews each lease and returns one error per request (nil,
	// ErrNotHeld, or an ErrUnavailable error), in order.
	ExtendMany(ctx context.Context, reqs []ExtendRequest) []error
}

// ExtendPartitioner is implemented by a BatchExtender whose renewals fall
// into independent groups — the nodes of a Redis Cluster, say — so that a
// slow or failed group need not hold up the others. The watchdog then calls
// ExtendMany once per group, all groups at once, each in its own goroutine
// with a deadline of its own: the renewals of a healthy node land while a
// stalled node's call waits for its timeout. Without it (or when it has a
// single group) the watchdog makes one ExtendMany call for the whole batch.
//
// One ExtendMany call per group, rather than a callback per result from one
// call, keeps the SPI a plain request/response: each call has one owner and
// ends when it returns, and ExtendMany itself stays unchanged.
type ExtendPartitioner interface {
	// PartitionExtends splits reqs into groups of indexes into reqs, each
	// index in exactly one group, such that ExtendMany of one group never
	// waits on the store a request of another group goes to. It should not
	// block on I/O beyond a routing-table refresh bounded by ctx. nil means
	// one group; any other result that is not such a partition is ignored
	// (one group too).
	PartitionExtends(ctx context.Context, reqs []ExtendRequest) [][]int
}

// LossNotifier is implemented by backends that learn on their own that a
// held lock is gone — a PostgreSQL session that died, say — so the holder is
// told at once rather than at its next renewal.
type LossNotifier interface {
	// NotifyLoss arranges for fn to be called (once, on any goroutine) when
	// owner's lock on key is lost; if it is not held now, fn is called soon.
	// stop cancels the arrangement; it must be safe to call more than once.
	NotifyLoss(key string, owner Owner, fn func()) (stop func())
}
