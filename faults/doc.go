// Package faults is lockx's fault-injection suite: lock holders run as
// separate OS processes (faults/internal/holder) that the tests pause,
// resume and kill, Redis nodes are real redis-server processes from
// internal/testenv, and network faults come from Proxy, a small in-process
// TCP proxy with latency and one-way blackholes.
//
// etcd is in the suite too, although lockx/etcdlock is a module of its own
// that the root module does not import: faults/etcd, a nested module, is
// one program that runs either a real etcd server (etcd's own main) or the
// holder with etcdlock added (faults/internal/holderkit, the holder every
// backend shares). The tests here build it when an etcd scenario first runs
// and start its servers through testenv.StartEtcd, so the etcd scenarios
// go through the same driver and checks as every other backend's.
//
// Every scenario protects a register — a PostgreSQL row that is never
// faulted — twice: once written through pglock.FencedExec with the
// holder's fencing token, once with a plain UPDATE. Both histories are
// checked with porcupine against the fenced-register model
// (RegisterModel): the fenced one must pass under every fault, the
// unfenced twin must fail where theory says a stale holder can write,
// so the checker is shown able to fail.
//
// The lock itself is checked too. A fault shorter than the lease must not
// let a second client in. Where only the lease's expiry can hand the lock
// over, the second grant must come no earlier than the first holder's
// lease could have expired on the server: the call of the last grant or
// renewal it heard succeed, plus the lease, less lockx's drift allowance,
// all on the suite's one monotonic clock (Now). The lock history is checked
// against a fenced-mutex model (MutexModel): asserted where the lock alone
// must hold (a fault the watchdog survives, a grant refused outright),
// reported elsewhere, since leases legitimately expire under the faults
// injected. TestFaultLockSensitivity runs holders whose lock is broken on
// purpose (a lease that ends early, a lock that ignores its holder) and
// requires these checks to fail them.
//
// The short form runs in `make test`; LOCKX_FAULTS=long (`make faults`)
// runs more iterations and every scenario and rewrites docs/reliability.md.
package faults
