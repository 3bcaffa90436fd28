// Package redislock is lockx's Redis backend. It serves locks from a single
// Redis node, a Sentinel-managed primary (go-redis's failover client) or a
// Redis Cluster, through any redis.UniversalClient:
//
//	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:6379"}})
//	locks := lockx.New(redislock.New(rdb))
//	defer locks.Close() // closes the backend; rdb stays yours to close
//
//	err := locks.Do(ctx, "order:42", func(ctx context.Context) error {
//		// ctx is cancelled if the lock is lost; pass l.Token() to the
//		// resources you write so they can fence off a stale holder.
//		return nil
//	})
//
// With Sentinel, pass MasterName and the sentinels' addresses in
// UniversalOptions (or use redis.NewFailoverClient); with a Cluster, several
// node addresses (or redis.NewClusterClient). Every Backend that shares
// locks must use the same prefix (WithPrefix, default "lockx:").
//
// # Data model
//
// All keys of one lock share one hash tag, the user key in braces, so every
// script touches a single Cluster slot:
//
//	lockx:{order:42}      string  the holder's owner (16 bytes for an owner from
//	                              lockx.NewOwner) + the fencing token (8 bytes);
//	                              PX = the lease. After a release: the token
//	                              alone, for the tombstone window (2 s).
//	lockx:{order:42}:w    set     ids of backends with a racing waiter (older versions)
//	                              (contended keys only)
//	lockx:{order:42}:q    zset    fair queue: owner by arrival (server µs)
//	lockx:{order:42}:qd   hash    fair queue: owner → "<deadline ms>:<lease ms>:<backend id>"
//
// An uncontended lock is one small string: about 165 bytes of Redis memory
// (Redis 7.0, 100k locks named "order:N", fencing token included). The
// fair-queue and waiter keys exist only while a key is contended and expire
// on their own.
//
// Each operation is one Lua script (scripts/*.lua, embedded), sent with
// EVALSHA and re-sent with EVAL only after NOSCRIPT. On Redis 7.0 and later
// the plain lock's scripts run as functions of one library instead (FCALL),
// which the Backend loads on a node the first time it finds it missing
// there; where FCALL is unknown (Redis 6, miniredis) or denied by the ACL,
// the scripts run as before. Acquire is idempotent
// per owner (a retry after a lost reply gets the same grant and token);
// Release and Extend check the owner and never touch another owner's lock.
//
// # Fencing tokens and the clock
//
// A grant over the tombstone a release leaves gets the tombstone's token + 1;
// a grant at a key without one (never locked, idle past the tombstone
// window, expired, evicted, flushed) gets the server clock (TIME, in µs),
// or one past the previous token if that is larger. Tokens never run ahead
// of the clock, since each grant takes more than a microsecond, so once a
// tombstone lapses the clock is past every earlier token of the key. Tokens
// are therefore strictly increasing per key without any state that
// outlives a lock by more than the tombstone window, and they stay far
// below 2^53 (driver.MaxToken), so Lua numbers hold them exactly. A
// Quorum's nodes take max(clock, previous token + 1) on every grant: a
// quorum compares the tokens of different nodes, which only their clocks
// keep in step.
//
// The assumption behind it: the clock of the server that holds the key does
// not step back by more than the tombstone window (WithTombstone) while the
// key is free. After a failover the new primary's clock issues the tokens,
// so primaries and replicas must keep their clocks in sync (NTP slewing, not
// stepping); a step back larger than the window can repeat or reorder tokens
// of a key that was free during the step.
//
// # Waiting without polling
//
// Each Backend opens one pub/sub connection, on first need, subscribed to
// its own channel ("<prefix>w:<backend id>"). A refused attempt that will
// wait queues (see Fair queues); the release script publishes only to the
// backend of the owner at the queue's head. A dispatcher goroutine routes messages to the waiting
// Acquire calls; after a reconnect it wakes them all, since a release may
// have been missed. Close ends it.
//
// # Fair queues
//
// A refused attempt that will wait joins the key's queue, with lockx.Fair
// or without it (the default since issue 31: racing waiters cost a hot key
// several round trips a handoff); the release script hands a free key to the
// queue's head itself and pushes one message to the head's backend, which
// answers the head's next attempt without a round trip. A try (no wait) is
// refused while waiters are queued. An entry that its waiter stops
// refreshing (a crashed process) is dropped after the queue TTL
// (lockx.WithQueueTTL, or WithQueueTTL here for the default); a waiter that
// gives up withdraws its entry.
//
// A semaphore's waiters (patterns/semaphore) are handed their permits the
// same way: a release grants the queued requests that now fit, in queue
// order, and pushes each grant to its waiter's backend. The lease of a
// handed grant is the one asked for capped at the queue TTL, so a waiter
// that crashed holds the key or the permits no longer than its entry
// would have lived.
//
// # Failover
//
// Redis replicates asynchronously: a primary can acknowledge a grant and
// fail before a replica has it, and the promoted replica then grants the
// lock again. WithReplicaAck closes that window for a chosen number of
// replicas (WAIT in the same pipeline as the grant; an unacknowledged grant
// is released and reported as driver.ErrUnavailable). Fencing tokens remain
// the end-to-end safety net.
//
// # Throughput
//
// An uncontended acquire and release is two round trips, one script each.
// While several goroutines call at once, their scripts go out together as
// pipelines of the client, several on the wire at once (WithAutoPipeline),
// so throughput under concurrency is bounded by Redis's script execution
// rather than by system calls; while fewer than eight calls are out, each
// is sent at once on its own. Backend.AcquireMany takes a set of
// keys in one script call per node (lockx's ManyAcquirer, behind
// Client.AcquireMany), and the watchdog renews every due lock in one
// pipeline per node: on a Cluster one call per master node, concurrently
// (driver.ExtendPartitioner), so a stalled master delays only the renewals
// of its own locks.
package redislock
