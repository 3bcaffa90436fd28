// Package idempotency runs work at most once per key and replays its
// outcome — Stripe's idempotency keys, the IETF Idempotency-Key draft and
// Brandur's PostgreSQL design, over any lockx backend.
//
//	locks := lockx.New(redislock.New(rdb)) // memlock, pglock work the same
//	guard, err := idempotency.New(locks)   // outcomes kept in the backend
//	lockx.SetDefaultIdempotency(guard)
//
//	receipt, err := lockx.Idempotent(ctx, "charge:"+orderID, func(ctx context.Context) (Receipt, error) {
//		return charge(ctx, orderID) // runs once per orderID for 24 h
//	})
//
// # Semantics
//
// The first call for a key takes the key's lock, runs fn and stores its
// outcome for the retention (WithRetention, default 24 h); later calls with
// the key get that outcome without running fn, until it expires, after which
// the key is new again. A call that arrives while the first one runs fails
// with lockx.ErrInProgress at once, or waits up to WithWait and then returns
// the first call's outcome.
//
// Failures are outcomes too. An error of fn is terminal unless the Guard's
// predicate (WithRetryable; default Retryable) calls it retryable or it was
// marked with Retry: terminal errors are stored and replayed as
// *lockx.StoredError (matching the sentinels registered with WithErrors),
// retryable ones are returned and forgotten, so a retry runs fn again.
//
// Outcomes can carry a request fingerprint (Guard.Run); a key reused with a
// different fingerprint fails with lockx.ErrKeyReused. Scope builds keys per
// caller (user, tenant, API key), so no caller can replay another's outcome.
//
// # Crashes and the lock
//
// The lock is what stops two calls with one key from running fn at the same
// time. If the process dies inside fn, nothing is stored and the lock's
// lease runs out (WithLockOptions(lockx.WithWatchdog(d)) sets how soon), so
// a later call runs fn again: fn must be safe to run again after a crash —
// use a downstream idempotency key derived from the key, or check for its
// own effects first. Work that writes to a database can do better with RunTx
// (unique-index fallback): the outcome commits in the same transaction as
// the work under a UNIQUE key, so a crash leaves neither, and even a lock
// granted twice lets exactly one transaction commit.
//
// # Stores
//
// Outcomes live in a driver.ResultStore: memlock.Backend (in-process),
// redislock.Backend (SET NX PX) and pglock.Backend (a table with a primary
// key) implement it, and idemtest.RunStore checks any other. The HTTP layer
// is package middleware (Idempotency) and middleware/echomw.
package idempotency
