// Package faults is lockx's fault-injection suite: lock holders run as
// separate OS processes (faults/internal/holder) that the tests pause,
// resume and kill, Redis nodes are real redis-server processes from
// internal/testenv, and network faults come from Proxy, a small in-process
// TCP proxy with latency and one-way blackholes.
//
// Every scenario protects a register — a PostgreSQL row that is never
// faulted — twice: once written through pglock.FencedExec with the
// holder's fencing token, once with a plain UPDATE. Both histories are
// checked with porcupine against the fenced-register model
// (RegisterModel): the fenced one must pass under every fault, the
// unfenced twin must fail where theory says a stale holder can write,
// so the checker is shown able to fail. The lock history is checked
// against a fenced-mutex model (MutexModel); a violation there is
// reported, not failed, since leases legitimately expire under the
// faults injected.
//
// The short form runs in `make test`; LOCKX_FAULTS=long (`make faults`)
// runs more iterations and every scenario and rewrites docs/reliability.md.
package faults
