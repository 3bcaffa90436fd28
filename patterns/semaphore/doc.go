// Package semaphore provides a distributed counting semaphore on any lockx
// backend that implements driver.SemaphoreBackend (memlock, redislock): at
// most limit permits of a named semaphore are held at once, across every
// process sharing the backend.
//
//	sem := semaphore.New(locks, "api:pdf-render", 8) // locks is a *lockx.Client
//	p, err := sem.Acquire(ctx)
//	if err != nil { … }
//	defer p.Release(context.Background())
//	// work under p.Context(): it is cancelled if the permit is lost
//
// # Semantics
//
// Permits are leases, as in Redisson's RPermitExpirableSemaphore: each
// Permit has its own owner and lease, renewed by a watchdog (or fixed with
// lockx.WithLease). A holder that crashes returns its permits when its lease
// ends; a live holder whose lease cannot be renewed sees Lost close and its
// Context cancelled with lockx.ErrLost. Only the Permit handle can release
// its permits: another process cannot release them for it.
//
// Waiters are served first come, first served: a request for several
// permits (AcquireN) is not overtaken by a stream of small ones. NonFair
// lets a request that fits take permits ahead of the queue.
//
// # Capacity
//
// The limit travels with every request, so capacity is what the requesting
// process says it is. SetLimit changes it at runtime: growing lets waiters in
// at their next attempt; shrinking revokes no held permit, it only stops new
// grants until usage has dropped below the new limit. Every process sharing a
// semaphore should use the same limit; during a rollout that changes it, the
// grants follow each requester's own value.
//
// A semaphore key is its own namespace: it does not conflict with a plain
// lockx lock or a read/write lock of the same name. PostgreSQL support comes
// with the pglock backend implementing driver.SemaphoreBackend.
package semaphore
