// Package pglock is lockx's PostgreSQL backend: session advisory locks
// through pgx v5, fencing tokens from a durable sequence, leases, fair
// queues, LISTEN/NOTIFY wake-up, and transaction-scoped locks.
//
//	pool, _ := pgxpool.New(ctx, "postgres://app@db/app")
//	locks := lockx.New(pglock.New(pool))
//	defer locks.Close() // before pool.Close
//
//	lock, err := locks.Acquire(ctx, "order:42")
//	...
//	defer lock.Release(ctx)
//	write(ctx, lock.Token()) // UPDATE … WHERE fence <= $token
//
// # How a lock is held
//
// A key is hashed with its namespace (WithNamespace) to a 64-bit
// advisory-lock key (FNV-1a, or HMAC-SHA256 under WithKeySecret; a
// collision costs false contention, never safety, and an attempt on an id
// held under another key is refused with ErrKeyCollision). The lock is
// taken with pg_try_advisory_lock on one of a few pinned holder sessions
// (WithSessions, default 2) that the Backend keeps out of the pool; many locks share a session, and the Backend's memory
// records which owner holds which key, since PostgreSQL cannot tell two
// owners of one session apart. In the same statement the grant draws its
// fencing token from the sequence <schema>.lockx_fence. A hold that lasts
// the publish delay (WithPublishDelay, default 5 ms) then records a row in
// the UNLOGGED table <schema>.lockx_held (key, owner, token, lease, session
// pid), which lets any process check an owner, see a holder's lease, or
// force-release a lock; a shorter hold — every hold of a hot key — never
// writes one, so its handoff costs the server the lock, the token and the
// unlock. A row counts only while unexpired and while its session holds the
// advisory lock; the release of a hold that wrote one marks it released.
//
// Holder sessions commit asynchronously, so no grant waits for a disk
// flush, and use generic plans for their prepared statements (re-planning
// the multi-row grant and release statements for each batch cost more than
// running them). Tokens still never go back: a crash or a failover empties the
// UNLOGGED marker table <schema>.lockx_epoch, and the first session after
// it moves the sequence ahead by 2^30 in a synchronous commit before any
// grant (see fence_guard.go and docs/architecture.md).
//
// If a holder session dies — pg_terminate_backend, a server restart, a
// network cut — PostgreSQL frees its locks; the Backend's health check
// (WithHealthInterval, default 1 s) notices and reports each of them lost:
// the next Extend returns driver.ErrNotHeld, so the Client's watchdog fires
// Lost, and NotifyLoss callbacks run at once.
//
// # Leases
//
// Advisory locks have no TTL. The lease given to Acquire (lockx.WithLease,
// or the watchdog's) lives in the Backend's memory and, once the hold has
// written it, in the lock's row (by the server's clock):
// when it passes without Extend, the Backend frees the lock and wakes
// waiters. A holder process that dies frees its locks at once (its sessions
// end); one that hangs keeps them until its sessions are killed — use
// fencing tokens for that case.
//
// # Waiting
//
// Waiters do not hold a connection each. A plain waiter whose Backend has a
// free wait session (WithWaitSessions, default 1) queues in PostgreSQL's own
// lock queue there: pg_advisory_lock, in slices of 200 ms, in the statement
// that also draws the token, so a release hands the lock
// over inside the server, in arrival order, with no notification and no
// competing re-attempt. A waiting Acquire connects the wait sessions in the
// background, so that they are ready when the key turns out to be
// contended, and a waiter refused by the holder queues on a free one within
// the same Acquire. A wait session serves one waiter at a time and then
// carries its hold until the release. Every other waiter — more waiters
// than wait sessions, and fair waiters — is woken by notification: its
// process holds a shared "wait flag" advisory lock for the key on its one
// listener session, which LISTENs on the schema's channel; a release
// notifies only when it cannot take that flag (it takes it and gives it
// back at once, so that one release's test never outlasts its statement
// and makes the next release notify), so releases nobody waits for that
// way send no NOTIFY. Fair waiters (lockx.Fair) queue in
// <schema>.lockx_queue, across processes, in arrival order; only the head
// may take the lock, a release's notification names the head so that only
// it wakes, and plain acquisitions yield to live fair waiters. Crashed
// waiters drop out after their queue TTL.
//
// # Read/write locks and semaphores
//
// The Backend implements driver.RWBackend (patterns/rwlock) with advisory
// locks on the holder sessions: a reader holds the key's read/write
// advisory key shared (pg_try_advisory_lock_shared), a writer exclusive, so
// PostgreSQL keeps readers and writer apart; a read is one statement to
// acquire and one to release. Each hold also has a row in
// <schema>.lockx_pattern_held with its lease (written by the grant), so any
// process can extend or force-release it by owner; the holder's Backend
// frees the lock at the lease's end and when a renewal finds the row gone.
// A refused writer queues in lockx_pattern_queue (for its queue TTL) and a
// fair reader yields, in its acquiring statement, to a writer queued ahead
// of it (writer preference). A write's token comes from the fence sequence;
// a reader's token is the latest write's. Releases notify the waiters that
// can now be granted, when some process waits for the key.
//
// driver.SemaphoreBackend (patterns/semaphore) is table-based: each permit
// holder is a row of lockx_pattern_held with a lease on the server's clock,
// waiters are rows of lockx_pattern_queue, and each decision is one
// transaction on a pool connection under pg_advisory_xact_lock on the key's
// pattern hash, so decisions on a key are serialised; a process's
// concurrent decisions on a key share one transaction (sem_batch.go).
// Expired rows are purged by every decision; rows are not tied to a
// session, so only Release or expiry frees them. A release hands the
// permits it frees to the queued requests that now fit and NOTIFYs their
// owners, which confirm with one statement (sem.go).
//
// # Transactions
//
// TxLock and TryTxLock take a key for the rest of a transaction
// (pg_advisory_xact_lock) with a fencing token from the same sequence: the
// lock and the write it protects commit or roll back together. They wait in
// PostgreSQL's queue with nothing around it, so on one very hot key they
// hand over faster than session locks, whose cancellable, fair and
// notification-woken waits and holder rows each cost the handoff
// (docs/backends.md measures both).
//
// # Schema and rights
//
// The schema (WithSchema, default "lockx") is created on first use, or by
// Migrate at deploy time (then use WithoutAutoMigrate). Creating it needs
// CREATE on the database; using it needs USAGE on the schema, USAGE and
// UPDATE on the sequence, and SELECT, INSERT, UPDATE, DELETE on its
// tables (SELECT and INSERT suffice on lockx_epoch). Errors name the missing right.
//
// # Poolers
//
// Session advisory locks need the session: behind a pooler that hands the
// server connection to other clients between transactions (PgBouncer with
// pool_mode = transaction or statement) they would be shared or leaked. A
// Backend detects such a pooler when it opens a holder session and refuses
// every lock with ErrTransactionPooler; session-mode pools are fine.
//
// # Connection budget
//
// A Backend uses at most WithSessions holder sessions (capped at half the
// pool's MaxConns) and WithWaitSessions wait sessions plus one listener
// session while anything waits, however many locks are held or awaited:
// with the defaults, 4 server sessions for 1,000 held locks and 1,000
// waiters on one key alike (TestThousandWaitersOneKey counts them in
// pg_stat_activity). Wait sessions come from the pool while they fit in its
// half beside the holder sessions; otherwise the Backend opens them itself
// as dedicated connections with the pool's config, outside MaxConns: with
// pgxpool's default MaxConns of 4 (on up to 4 cores) a Backend has 2 holder
// sessions from the pool and 1 dedicated wait session, so a hot key is
// still handed over in the server's lock queue rather than by notification
// and a re-attempt. Count them in the server's max_connections. Extra
// holder sessions cost server CPU per lock on a small
// server (their batches are smaller; see WithSessions) and extra wait
// sessions help only processes in which several goroutines wait for one
// key. Keep max_locks_per_transaction × max_connections above the number
// of locks held at once across the cluster: session advisory locks live in
// the server's shared lock table.
// docs/architecture.md (section "PostgreSQL backend") explains each choice.
package pglock
