// Package driver is the contract between lockx and the systems that store
// its locks, in the spirit of database/sql/driver: package lockx is what
// programs call, this package is what backends implement.
//
// A backend implements Backend — five methods that make one attempt, renew,
// release, read a lease and close — and any of the optional capabilities
// that its store can serve:
//
//   - Notifier: wake waiters on release instead of leaving them to poll.
//   - BatchExtender, ExtendPartitioner: renew many leases per round trip,
//     and per independent node.
//   - LossNotifier: tell a holder at once that its lock is gone.
//   - Passer: hand a held lock to another owner in one atomic step
//     (lockx.LocalFirst's handoff between goroutines of one Client).
//   - ManyAcquirer, ManyReleaser: take and give back a set of keys in one
//     round trip.
//   - Inspector: list held locks, for operators.
//   - FenceStore: check fencing tokens on the resource side.
//   - RWBackend, SemaphoreBackend, ResultStore, StockBackend, OrderStore:
//     the storage contracts of the patterns (read/write locks, semaphores,
//     idempotency, inventory). SupplyCap is an OrderStore's own optional
//     capability, found with a type assertion on the store.
//
// Everyone who needs a capability finds it with As, which walks wrappers
// the way errors.As walks wrapped errors; wrappers answer it for the
// capabilities they forward (see As).
//
// The Check* functions validate arguments the same way for every backend,
// so that every store refuses bad input with the same *ArgError. Errors that
// are not verdicts are wrapped with Unavailable.
//
// The types both sides need — Token, Owner, LockInfo, ArgError,
// StaleTokenError and the sentinel errors — live here; package lockx
// re-exports the ones its users meet under the same names (type aliases and
// the same error values, as os.FileMode is fs.FileMode), so errors.Is and
// errors.As work across the boundary.
package driver
