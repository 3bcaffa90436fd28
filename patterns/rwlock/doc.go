// Package rwlock provides distributed read/write locks on any lockx backend
// that implements driver.RWBackend (memlock, redislock): many readers or one
// writer per key.
//
//	rw := rwlock.New(locks) // locks is a *lockx.Client
//	r, err := rw.RLock(ctx, "stock:42")
//	if err != nil { … }
//	defer r.Release(context.Background())
//	// read under r.Context(): it is cancelled if the read lock is lost
//
// # Semantics
//
// Every reader and the writer hold their own lease, renewed by a watchdog
// like a lockx.Lock's (or fixed with lockx.WithLease). A crashed reader's
// hold expires with its lease, so it blocks writers for one lease at most.
// Loss surfaces as Lost and as cancellation of the handle's Context.
//
// Writer preference is the default: a writer waiting for a key keeps new
// readers out, so a steady stream of readers cannot starve writers. Readers
// that were already waiting before the writer still go first, and all
// readers waiting behind a writer enter together when it is done, so neither
// side starves. ReaderPreference lets readers in while a writer waits.
//
// Downgrade (write → read while holding) is allowed: Downgrade, or RLock
// under the write handle's Context followed by its Release. Upgrade (read →
// write) is refused with ErrUpgrade instead of deadlocking.
//
// Acquisitions under a handle's Context re-enter: RLock under a read
// handle's Context returns a new handle on the same read hold (a nested read
// never queues behind a waiting writer), and likewise for Lock.
//
// # Tokens
//
// A write lock's Token is a fencing token, strictly greater than every token
// issued earlier for the key. A read lock's Token is the key's read epoch:
// the latest write's token while the key is in use (readers of one epoch
// share it), or a fresh, greater token once the key has been idle. It is at
// least the token of every write that completed before the reader entered,
// and no writer with a greater token is granted while the reader holds. A
// resource that remembers the highest token it has seen can therefore
// reject writes and reads that carry a lower one: they come from a holder
// that was overtaken.
//
// A read/write key is its own namespace: it does not conflict with a plain
// lockx lock or a semaphore of the same name. PostgreSQL support (shared
// advisory locks) comes with the pglock backend implementing
// driver.RWBackend.
package rwlock
