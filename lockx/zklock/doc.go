// Package zklock is a lockx backend on ZooKeeper (github.com/go-zookeeper/zk),
// built on the recipe of Curator's InterProcessMutex:
//
//	backend, err := zklock.Dial(ctx, []string{"zk1:2181", "zk2:2181", "zk3:2181"},
//		zklock.WithSessionTimeout(10*time.Second))
//	locks := lockx.New(backend) // Close closes the backend and its session
//
// It implements driver.Backend, driver.Notifier, driver.LossNotifier,
// driver.RWBackend (patterns/rwlock), driver.SemaphoreBackend
// (patterns/semaphore) and driver.Inspector (cmd/lockx --zookeeper,
// lockx.ForceUnlock), and passes lockxtest.Run, rwlocktest.Run and semaphoretest.Run.
//
// # Data model
//
// Each key is a container znode <root>/locks/<key> (read/write locks:
// <root>/rw/<key>, semaphores: <root>/sem/<key>; escaped: bytes outside
// [0-9A-Za-z_:-] become %XX), created on demand and removed by the server
// once it has been empty for a while. Each owner that holds or waits has
// one ephemeral sequential child "<owner>-<sequence>" (the owner escaped,
// so it contains no '-'). The lowest child holds the lock; the others wait
// in arrival order. Reentrancy is counted by lockx.Client, so an owner has
// at most one node per key (and side). Read/write locks and semaphores are
// described in rw.go and semaphore.go: Curator's InterProcessReadWriteLock
// (R and W nodes in one queue; a downgrade's node counts at its head), and
// weighted permits as H<n>/Q<n> nodes granted by a transaction conditional
// on the directory's version.
//
// # Operations and round trips
//
//   - Acquire sends one multi: create the node and write dir's (empty) data.
//     The write's stat comes back with dir's mzxid — the transaction's zxid,
//     which is the new node's czxid — and dir's child count. When the node is
//     alone, that one round trip is the grant and its fencing token.
//     Otherwise the children are listed; a node that is not the lowest
//     watches only its predecessor (GetW: no herd; one ZooKeeper watch per
//     node per Backend however many local waiters share it) and is refused.
//     The Client's next attempt (woken by the watch) re-lists.
//   - Release deletes the node (one round trip), which fires the next node's
//     watch. A Release for an owner the Backend does not know — an operator's
//     force-release from another process, or a create whose reply was lost —
//     finds the owner's node by name.
//   - Extend and TTL check with one read that the node still exists.
//
// # Fencing tokens
//
// The token is the node's czxid. Zxids are totally ordered across the
// ensemble and grow with every write; their top 32 bits are the leader
// epoch, which grows with every election and restart. Since holders are
// granted in node order, every later holder of a key has a greater token —
// also after a restart or a failover. Tokens stay below driver.MaxToken
// while the epoch is below 2^21.
//
// # Leases: ZooKeeper has no per-lock TTL
//
// A znode lives as long as its session. lockx leases map onto that in two
// layers:
//
//   - The holder's Backend enforces the lease: a timer deletes the node when
//     the lease ends without an Extend (the watchdog's renewals, or
//     Lock.Extend). So WithLease behaves as on every backend while the
//     holder's process runs.
//   - The session bounds everything else: a process that crashes, freezes
//     or is cut off stops heartbeating, and the server deletes its nodes
//     when its session expires, one session timeout later. A frozen holder
//     with a lease shorter than the session timeout therefore keeps its node
//     until the session expires (its own lock context has ended at the
//     lease, and its token is stale: fence writes).
//
// Choose the session timeout as the time after which a dead process's locks
// must be free (Curator's default is 60 s; here 10 s), and leases as usual.
// The server clamps the timeout to [2, 20] × its tickTime; the Backend uses
// the negotiated value.
//
// # Disconnection and expiry (Curator's SUSPENDED and LOST)
//
// Curator reports SUSPENDED when the connection drops and LOST when the
// session has expired (or, since Curator 3, when SUSPENDED has lasted a
// session timeout); its mutex itself signals neither, and the application
// must listen and treat SUSPENDED as "may no longer hold the lock". zklock
// turns both into lockx's loss signal:
//
//   - Disconnected (SUSPENDED): every call fails at once with an error
//     matching driver.ErrUnavailable and ErrNoSession, so renewals fail and
//     waiters back off. If the client reconnects with the same session
//     within a quarter of the session timeout, nothing is lost (watches are
//     restored; waiters are woken to look again). After that quarter every
//     hold is declared lost: lockx's Lost closes and the lock context is
//     cancelled with driver.ErrLost, and if the session did survive, the
//     Backend deletes those nodes once it is back. A quarter because
//     go-zookeeper notices a silent connection only after two thirds of the
//     timeout without a reply, and the server may expire the session one
//     timeout after it last heard from the client, so the server can act as
//     early as one third of the timeout after the client notices; the
//     quarter keeps a margin. TestSessionExpiry shows the order: holder told
//     at 0.50 s, waiter granted at ~1.9 s for a 2 s session.
//   - Expired (LOST): every hold is lost at once; waiters' nodes are gone
//     too, so they are woken and queue again under the new session that
//     go-zookeeper opens. A waiter never waits on a dead session's node.
//
// # Classic recipe failures, and what zklock does
//
//   - A create whose reply is lost (connection loss after the server applied
//     it) leaves a node nobody knows. Node names carry the owner, like
//     Curator's protected mode: the owner's next attempt finds and adopts the
//     node, a Release deletes it by name, and if neither comes a timer
//     deletes it after the lease.
//   - A waiter that gives up must leave the queue, or it holds up everyone
//     behind it once it reaches the head. Fair waiters are withdrawn by the
//     Client (Release); a plain waiter's node is withdrawn 250 ms after its
//     last wait ended; a waiter whose process lives but stops trying (the
//     conformance suite's crashed waiter) loses its node after its queue TTL.
//   - Herd effect: each waiter watches only its predecessor, and each
//     release wakes one waiter.
//
// # Limits
//
// A leader failover disconnects every client until the new leader serves
// (followers drop their clients while they have no leader), so holders
// keep their locks through it only if election and reconnection take less
// than a quarter of the session timeout (TestEnsembleLeaderFailover: yes
// with a 10 s session, no with 4 s).
//
// After a reconnection the Backend waits 100 ms before it uses the session
// again: go-zookeeper re-registers its watches then without synchronising
// with its receive loop (a data race the race detector reports when a
// reply arrives meanwhile; go-zookeeper/zk PR #35).
//
// go-zookeeper's calls take no context: a call is bounded by the client's
// own failure detection, not by ctx (calls fail at once while
// disconnected). Each Backend is one session and one TCP connection.
// Renewals are one read per lock (no driver.BatchExtender). Extend's read is
// served by the connected server, which may lag the leader, so a
// force-release is noticed at the next renewal after it reaches that
// server.
package zklock
