// Package lockx is a distributed lock for Go: one API over six backends —
// Redis (single node, Sentinel, Cluster, Redlock; redislock), PostgreSQL
// advisory locks (pglock), MySQL/MariaDB (mysqllock), ZooKeeper (zklock),
// etcd (etcdlock) and an in-process backend (memlock) — with leases kept
// alive by a watchdog, loss signalled by cancelling the holder's context,
// reentrancy, monotonic fencing tokens, fair FIFO waiting and wake-up by
// notification instead of polling.
//
// # Quick start
//
//	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:6379"}})
//	locks := lockx.New(redislock.New(rdb)) // or memlock.New(), pglock.New(pool)
//	defer locks.Close()
//
//	err := locks.Do(ctx, "order:42", func(ctx context.Context) error {
//		// ctx is cancelled if the lock is lost: stop writing then.
//		return ship(ctx, 42)
//	})
//
// Acquire and TryAcquire return a *Lock for finer control: Release, Extend,
// TTL, Token (the fencing token to hand to the resource you write), Lost (a
// channel closed when the lease is lost) and Context (cancelled on loss or
// release, and carrying the owner so that nested Acquire calls re-enter).
//
// # Leases and the watchdog
//
// By default a lock has a 30 s lease that the client's watchdog renews every
// lease/3 until Release, batching the renewals of all locks of a client into
// one round trip where the backend allows. If renewal fails, the holder is
// told — Lost closes and the context is cancelled with cause ErrLost — before
// the lease can have run out on the server: the local validity is
// lease − elapsed − drift. WithLease sets an explicit lease without the
// watchdog: the lock expires on schedule unless the holder calls Extend.
//
// # Fencing
//
// A lock can be lost without the holder noticing in time (a long GC pause, a
// partition, a Redis failover). Each grant therefore carries a Token strictly
// greater than every earlier token of the key; a resource that rejects writes
// with a token lower than the highest it has seen is safe even then.
//
// # Waiting
//
// Acquire waits until the lock is granted, the context ends or the wait
// budget (WithWait) is spent. Backends that implement Notifier wake waiters
// on release; the exponential backoff with jitter (50 ms → 1 s, bounded by the
// holder's remaining lease) is only the fallback. Fair grants in arrival
// order and wakes only the next waiter. LocalFirst queues the goroutines of
// one process in-process so that only one of them contends remotely.
//
// # Errors
//
// Verdicts are sentinels (ErrNotAcquired, ErrNotHeld, ErrLost,
// ErrUnavailable, ErrClosed) to test with errors.Is; bad arguments are
// *ArgError values matching ErrInvalidArgument; context errors stay visible
// next to ErrNotAcquired. A backend that cannot be reached never grants a
// lock.
//
// # Backends
//
// A backend implements the small driver.Backend interface of package
// lockx/driver; optional capabilities (driver.Notifier,
// driver.BatchExtender, and those the patterns use) are further interfaces,
// found with driver.As so that wrappers such as lockx/breaker keep them.
// Programs only pass a backend to New; package driver is for the authors of
// backends, wrappers and patterns. Package lockxtest is the conformance
// suite every backend passes.
package lockx
