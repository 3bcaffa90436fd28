// Package etcdlock is lockx's etcd backend: locks as keys bound to leases,
// fencing tokens from etcd's create revisions, FIFO queues in which each
// waiter watches only its predecessor, and read/write locks and semaphores
// on the same scheme. It lives in a module of its own, so etcd's
// dependencies reach only programs that import it.
//
//	cli, _ := clientv3.New(clientv3.Config{Endpoints: []string{"10.0.0.1:2379"}})
//	locks := lockx.New(etcdlock.New(cli))
//	defer locks.Close() // before cli.Close
//
//	lock, err := locks.Acquire(ctx, "order:42")
//	...
//	defer lock.Release(ctx)
//	write(ctx, lock.Token()) // UPDATE … WHERE fence <= $token
//
// # How a lock is held
//
// All entries of a key live in one directory, <prefix>l<len>:<key>/ (the
// length keeps "a" and "a/b" apart). The holder is the key
// <dir>h/<owner>, put on a lease of its own in a transaction that succeeds
// only if the directory is empty — or, for a waiter, only if no holder
// appeared since it last looked and its queue entry is still the one it
// wrote. Its create revision is the fencing token: etcd's revision counter
// rises with every write to the cluster, across failovers, so every later
// grant of any key has a larger one, with no per-key state to keep.
//
// Every grant has its own lease, with the TTL the caller asked for rounded
// up to whole seconds (etcd leases count seconds, and a cluster raises TTLs
// below its minimum, 1.5 election timeouts). That answers etcd#6111 (a TTL
// per session in etcd's concurrency package): a 1 s lock and a 30 s lock of
// one process expire on their own schedules. The lease the caller asked for
// is also kept to the millisecond by the holder's Backend, which revokes the
// lease when it runs out unrenewed; etcd's lease, never shorter, frees the
// lock when the holder's process is gone.
//
// Release revokes the grant's lease, which deletes the key; the Backend
// remembers the lease it was granted, and another process finds it on the
// key. Lease ids are never reused, so a release that is retried after its
// first try went through cannot remove a newer grant of the same key, even
// to the same owner (etcd#22082). Extend is a keep-alive of the lease, or,
// when the new lease is longer than the lease's TTL, a move of the key to a
// new lease in a transaction that checks the create revision (so the token
// stays). The lockx watchdog drives these renewals (ExtendMany runs them
// concurrently), in place of etcd's own keep-alive loop.
//
// # Loss
//
// NotifyLoss watches the holder's key from the grant's revision and reports
// the lock lost when it is deleted: its lease expired or was revoked, or an
// operator deleted it. A renewal that finds the lease gone reports the lock
// not held, and a holder cut off from the cluster loses its lock by its
// own clock within the lease, as every lockx backend does (etcd#6127: its
// Mutex reports none of these). Holds shorter than WithLossWatchDelay open
// no watch.
//
// # Waiting
//
// Fair waiters (lockx.Fair) write a queue entry <dir>q/<owner> on a lease
// of their queue TTL, which each attempt renews: a waiter that stops
// refreshing leaves the queue (its Backend withdraws it after the queue
// TTL; etcd drops it when its lease ends if the process is gone), and a
// waiter whose entry vanished queues again at its next attempt instead of
// waiting for ever (etcd#19597). The queue is ordered by create revision;
// each waiter watches only the entry just ahead of it, and the head watches
// the holder, so a release wakes one waiter. Plain waiters do not queue:
// they watch the holder and compete when it goes, and they yield to queued
// fair waiters. A watch starts at the revision the attempt read, so a
// release between the attempt and the wait is never missed.
//
// # Read/write locks and semaphores
//
// Read and write holds are entries <prefix>rw<len>:<key>/h/r<owner> and
// …/h/w<owner>; permit holds are <prefix>s<len>:<key>/h/<owner> with the
// count as value. Each has its own lease, as locks do. A grant is decided
// from a read of the directory and committed by a transaction that checks
// that no holder has been added or changed since that read (deleted
// holders only free room), so decisions stay exact across processes. A
// reader's token is its read epoch, recorded in its entry: the epoch of
// the readers already in, or its own create revision.
//
// # What survives which fault
//
// Locks live in etcd's replicated store: a member or the leader dying
// loses nothing (etcd renews every lease on a new leader), and holders keep
// renewing through any member. Without a quorum nothing can be granted or
// renewed; holders lose their locks by their own clocks within their
// leases. See docs/backends.md for measurements.
package etcdlock
