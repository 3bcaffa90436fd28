package redislock

import (
	"github.com/lockx-go/lockx/lockx/driver"
	"strconv"
	"strings"
	"time"
)

// Direct fair handoff. When a release finds a live fair-queue head, the
// release script writes the lock for the head itself (with the lease the
// head's last attempt asked for, kept in its queue entry), takes it off the
// queue and publishes "=<token>:<lease ms>:<len(owner)>:<owner><lock key>"
// to the head's backend. That backend records the grant here and wakes the
// head's watcher; the head's next Acquire is answered from the record
// without a round trip.
//
// The record's TTL must be safe for the core's local validity, which starts
// at the attempt's start: the lease began at the release on the server,
// which came after the server refused the head's most recent refused
// attempt, which came after that attempt was sent. So the answer is
// TTL = lease − (now − send time of that refused attempt), and the backend
// keeps that send time per (key, owner) for refused fair waiting attempts.
// When the TTL is not comfortably positive, or either record is missing, the
// attempt goes to the server as usual; Acquire is idempotent per owner, so
// it returns the handed-off grant with the same token.

// A semaphore's release hands permits over the same way (sem_wake in
// scripts/sem_lib.lua), with "+" in place of "=". Its records are kept
// under permitRecord(lk) rather than lk, so that a lock and a semaphore of
// the same name never take each other's handoff.

// permitRecord is the record key of the handoffs of the semaphore watched
// as lk. It is no lock key: those start with the prefix and '{' or '#'.
func permitRecord(lk string) string { return "s:" + lk }

// handoffMargin is the least TTL a recorded handoff must still have to be
// answered locally; below it the attempt goes to the server.
const handoffMargin = 5 * time.Millisecond

// sweepEvery bounds how often the records are swept for stale entries.
const sweepEvery = time.Second

type waitKey struct{ lk, owner string } // owner encoded

// waitRec is the local state of one fair waiter of this backend.
type waitRec struct {
	sent   time.Time // send time of its most recent refused attempt
	expire time.Time // the record is dropped after this
	// A handoff received for it (tok > 0).
	tok   driver.Token
	lease time.Duration
	// A semaphore waiter's: the limit of its refused attempt, which its
	// queue entry carries and a release hands it permits under.
	limit int64
	// The subscription's epoch when the refused attempt was sent
	// (notifier.epoch): a Watch registered in a later epoch may have missed
	// a message published while the subscription was down.
	epoch uint64
	// early: a message named this waiter while no refusal of it was
	// recorded (it overtook the reply of the attempt that queued it). It is
	// never taken as a grant: the refusal turns it into wake.
	early bool
	// wake: a Watch registered for this waiter fires at once, because a
	// message for it came before its refusal was recorded.
	wake bool
}

// refused records that a fair waiting attempt sent at sent, in subscription
// epoch epoch, was refused. Any handoff recorded before is dropped: a
// refusal after it means the grant is gone, or that the message overtook
// the refusal's reply. Either way the waiter's next Watch fires at once
// (wake), so that dropping it costs one round trip, never a lost wake-up:
// the attempt that queued a waiter may have been its first, sent before it
// watched (driver.Result.Queued).
func (n *notifier) refused(lk, owner string, sent time.Time, lease, qttl time.Duration, epoch uint64) {
	now := time.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.g.Closed() {
		return
	}
	if n.waits == nil {
		n.waits = make(map[waitKey]*waitRec)
	}
	n.sweep(now)
	k := waitKey{lk, owner}
	r := n.waits[k]
	if r == nil {
		r = &waitRec{}
		n.waits[k] = r
	}
	// Useful while the queue entry lives, and then for one lease.
	*r = waitRec{sent: sent, expire: now.Add(qttl + lease), epoch: epoch, wake: r.tok > 0 || r.early}
}

// named records that a message named owner as the waiter of lk: a handoff
// (tok > 0) or a wake-up. A waiter with no refusal recorded gets an early
// mark (see waitRec), which lives for earlyFor. Callers hold n.mu.
func (n *notifier) named(lk, owner string, tok driver.Token, lease time.Duration) {
	k := waitKey{lk, owner}
	r := n.waits[k]
	if r == nil {
		if n.waits == nil {
			n.waits = make(map[waitKey]*waitRec)
		}
		n.waits[k] = &waitRec{early: true, expire: time.Now().Add(earlyFor)}
		return
	}
	if tok > 0 && !r.early {
		n.handedOff(r, tok, lease)
	}
}

// earlyFor is how long an early mark waits for the refusal it overtook: a
// reply that comes later than this has been retried anyway.
const earlyFor = 10 * time.Second

// handedOff records a handoff message in r, the record of a waiter whose
// refusal is recorded. Callers hold n.mu.
func (n *notifier) handedOff(r *waitRec, tok driver.Token, lease time.Duration) {
	r.tok, r.lease = tok, lease
	if e := time.Now().Add(lease); e.Before(r.expire) {
		r.expire = e // the TTL it yields is negative after that anyway
	}
}

// takeHandoff consumes the record of (lk, owner) and returns the grant it
// holds, if one with a safe TTL does. A handoff grants at most the queue
// TTL; a holder that will not renew (renewed false) and asked for more must
// get its full lease from the server, so it falls back to an attempt, which
// re-grants idempotently with the full lease.
func (n *notifier) takeHandoff(lk, owner string, lease time.Duration, renewed bool) (driver.Result, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	k := waitKey{lk, owner}
	r := n.waits[k]
	if r == nil || r.tok <= 0 || r.early {
		return driver.Result{}, false // no handoff (yet): keep the refusal
	}
	delete(n.waits, k)
	if !renewed && r.lease < lease {
		return driver.Result{}, false
	}
	ttl := r.lease - time.Since(r.sent)
	if ttl < handoffMargin || ttl < r.lease/8 {
		return driver.Result{}, false
	}
	return driver.Result{Acquired: true, Token: r.tok, TTL: ttl}, true
}

// forget drops the record of (lk, owner): on a grant or a release.
func (n *notifier) forget(lk, owner string) {
	n.mu.Lock()
	if n.waits != nil {
		delete(n.waits, waitKey{lk, owner})
		n.sweep(time.Now())
	}
	n.mu.Unlock()
}

// sweep drops expired records, at most once per sweepEvery. Callers hold n.mu.
func (n *notifier) sweep(now time.Time) {
	if now.Sub(n.swept) < sweepEvery {
		return
	}
	n.swept = now
	for k, r := range n.waits {
		if now.After(r.expire) {
			delete(n.waits, k)
		}
	}
}

// refusedPermits is refused for a semaphore's waiter (rec a permitRecord)
// whose queue entry now carries limit.
func (n *notifier) refusedPermits(rec, owner string, sent time.Time, lease, qttl time.Duration, limit int64) {
	n.refused(rec, owner, sent, lease, qttl, 0)
	n.mu.Lock()
	if r := n.waits[waitKey{rec, owner}]; r != nil {
		r.limit = limit
	}
	n.mu.Unlock()
}

// takePermits is takeHandoff for a semaphore's waiter that asks under
// req.Limit now. Permits handed over under a larger limit (lowered since the
// waiter queued) are not answered here: the server takes them up against
// req.Limit (sem_acquire.lua).
func (n *notifier) takePermits(rec, owner string, req driver.PermitRequest) (driver.Result, bool) {
	n.mu.Lock()
	r := n.waits[waitKey{rec, owner}]
	stale := r != nil && r.limit > req.Limit
	n.mu.Unlock()
	if stale {
		return driver.Result{}, false
	}
	return n.takeHandoff(rec, owner, req.Lease, req.Renewed)
}

// parseHandoff splits a handoff payload "=<token>:<lease ms>:<rest>" into
// its grant and the usual wake-up payload rest.
func parseHandoff(p string) (tok driver.Token, lease time.Duration, rest string, ok bool) {
	p = p[1:]
	i := strings.IndexByte(p, ':')
	if i <= 0 {
		return 0, 0, "", false
	}
	t, err := strconv.ParseInt(p[:i], 10, 64)
	if err != nil || t <= 0 {
		return 0, 0, "", false
	}
	p = p[i+1:]
	j := strings.IndexByte(p, ':')
	if j <= 0 {
		return 0, 0, "", false
	}
	ms, err := strconv.ParseInt(p[:j], 10, 64)
	if err != nil || ms <= 0 {
		return 0, 0, "", false
	}
	return driver.Token(t), time.Duration(ms) * time.Millisecond, p[j+1:], true
}
