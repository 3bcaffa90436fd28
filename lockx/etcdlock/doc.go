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
// length keeps "a" and "a/b" apart). The holder is the oldest entry of the
// directory: <dir>h/<owner>, put by a transaction that succeeds only if
// the directory is empty, or the head of the queue (below). Its create
// revision is the fencing token: etcd's revision counter rises with every
// write to the cluster, across elections and restarts, and every later
// holder's entry is created later, so tokens rise with no per-key state.
//
// Every entry has a lease of its own, with the TTL the caller asked for
// rounded up to whole seconds (etcd's unit; a cluster raises TTLs below
// 1.5 election timeouts), plus an eighth from 8 s on. That answers
// etcd#6111 (a TTL per session in etcd's concurrency package): a 1 s lock
// and a 30 s lock of one process expire on their own schedules. The lease
// the caller asked for is kept to the millisecond by the holder's Backend,
// which deletes a lock whose lease lapsed unrenewed; etcd's lease, never
// shorter, frees the lock when the holder's process is gone. Leases cost a
// raft write to grant, so a Backend reuses the leases its released entries
// leave behind for its next entries of the same TTL, with a keep-alive
// sent alongside the put when the spare is not fresh enough.
//
// Release deletes the entry in a transaction that compares its create
// revision, so a release retried after its first try went through cannot
// remove a newer grant of the same key, even to the same owner
// (etcd#22082). A release through another Backend (a force release)
// revokes the lease found on the entry. Extend is a keep-alive of the
// lease, or a move to a longer lease in a transaction that checks the
// create revision (so the token stays). The lockx watchdog drives these
// renewals (ExtendMany runs them concurrently), in place of etcd's own
// keep-alive loop.
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
// Waiters write a queue entry <dir>q/<owner> on a lease of their queue
// TTL, which their attempts renew. The queue is ordered by create revision;
// each waiter watches only the entry just ahead of it, from the revision
// its attempt read, so a release wakes one waiter and none is missed. The
// head of the queue holds as soon as everything older is gone, without a
// write (etcd's own recipe): a handoff costs the release and the head's
// read. Every waiter queues, fair or not; the lockx Client withdraws fair
// waiters that give up, and a plain waiter's entry is withdrawn 250 ms
// after its last wait ended. A waiter that stops refreshing leaves the
// queue after its queue TTL (its Backend withdraws it; etcd drops it with
// its lease if the process is gone), and a waiter whose entry vanished
// queues again at its next attempt instead of waiting for ever
// (etcd#19597).
//
// # Read/write locks and semaphores
//
// Read and write holds are entries <prefix>rw<len>:<key>/h/r<owner> and
// …/h/w<owner>; permit holds are <prefix>s<len>:<key>/h/<owner> with the
// count as value; their waiters queue under q/ as lock waiters do, and a
// granted waiter's queue entry is replaced by a holder entry. Each has its
// own lease, as locks do. A grant is decided
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
