// Command lockx is the operator's tool for lockx locks: list and inspect
// held locks, watch them live, and evict a stuck holder.
//
//	lockx [flags] ls [PREFIX]          list held locks (key, owner, token, TTL, age, waiters)
//	lockx [flags] inspect KEY          show one lock
//	lockx [flags] watch [PREFIX]       refresh the list every --interval; --long flags old holders
//	lockx [flags] force-unlock KEY     evict KEY's holder (asks to confirm unless --yes)
//	lockx [flags] cron JOB --every D   last runs of a cronguard job (records in the backend's result store)
//	lockx [flags] leader NAME          who leads the election NAME (patterns/leader); --watch follows changes
//
// Connect with --redis URL (redis://[[user]:password@]host:port[/db],
// rediss:// for TLS, or just host:port, which means redis://host:port;
// several URLs separated by commas open a Redlock quorum over independent
// nodes, redislock.NewQuorum; or the LOCKX_REDIS_URL environment variable),
// --postgres URL (LOCKX_POSTGRES_URL)
// or --zookeeper host:port,... (LOCKX_ZOOKEEPER).
// --prefix must match the Redis backend's prefix (default "lockx:");
// --schema and --namespace the PostgreSQL backend's; --zkroot the
// ZooKeeper backend's root (default "/lockx"). --json prints JSON for
// scripts: an array for ls, an object for inspect and force-unlock, one
// array per line for watch.
//
// force-unlock fences off the evicted holder — its token plus one is
// recorded as seen for the resource named like the key, so a resource that
// checks tokens rejects the evicted holder's writes — then releases the
// lock as its owner would, which wakes its waiters. It records who did it
// and when in the backend's result store (key "lockx-audit/force-unlock/KEY/TIME")
// when the backend has one, and prints the record.
//
// Exit codes:
//
//	0  success
//	1  the backend failed or is unreachable
//	2  bad usage
//	3  no such lock: KEY is not held
//	4  force-unlock not confirmed
//	5  the backend cannot do this (no Inspector, or no result store for cron)
//
// A usage error prints one line saying what is wrong and a pointer to
// --help; a backend error names the command that met it. go-redis's own
// log lines are silenced: the error lockx prints already says it.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}
