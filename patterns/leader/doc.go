// Package leader elects one leader among the instances of a service, over
// any lockx backend, and hands the leader a fencing term.
//
//	e, err := leader.New(locks, "billing-scheduler") // locks is a *lockx.Client
//	…
//	err = e.Run(ctx, func(ctx context.Context, t *leader.Term) error {
//		// lead until ctx ends; write with t.Token() to fenced resources
//	})
//
// # Semantics
//
// The office is a lock ("leader:" + name) held under a watchdog-renewed
// lease (WithLease). Campaign waits for it and returns a Term:
//
//   - Token is the lock's fencing token: it rises with every new leader on
//     every backend, so a resource that keeps the highest term it has seen
//     (driver.FenceStore, middleware.Fencing) refuses the writes of a leader
//     that was deposed while paused or cut off.
//   - Context is cancelled when the term ends, with an *EndError cause that
//     matches lockx.ErrLost, ErrResigned or lockx.ErrClosed. Loss is
//     declared by the lock's local validity timer, lease − drift after the
//     last renewal was sent, which is before the lease can have run out at
//     the backend; the next leader can be elected only after that.
//   - Resign releases the lock: the backend wakes the next candidate at once
//     (candidates queue fairly), so a graceful handover costs a release and
//     a grant, not a lease.
//
// A leader that crashes is replaced once its lease runs out at the backend
// (or sooner where the backend sees the crash: a PostgreSQL or MySQL
// session, a ZooKeeper session).
//
// Leader reads who leads from the backend (driver.Inspector): the identity
// (WithIdentity, default host:pid) travels in the lock's owner id beside
// 128 random bits, so no record of its own is needed and every backend
// with an Inspector answers. Observe polls it and streams the changes.
//
// Adapters: package gocronleader makes an Election a gocron v2 Elector;
// Middleware serves leader-only HTTP endpoints.
//
// docs/patterns/leader.md compares the design with Curator, etcd,
// client-go and gocron.
package leader
