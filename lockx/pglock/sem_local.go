package pglock

import (
	"encoding/hex"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
)

// Grants handed over to this Backend's own waiters start at once. A grant
// handed over to a queued owner keeps its queue entry's expiry until the
// owner confirms it (semConfirm), so that a waiter that died while queued
// gives the permits back within its queue TTL, not a lease: one more
// statement and round trip per contended grant. An owner this Backend
// queued is alive as long as this process is, and it withdraws
// (ReleasePermits) if it gives up waiting; so a decision this Backend sends
// hands its own waiters their permits with the lease they asked for
// already started (the local owners and leases go with the statement), and
// the owner's next attempt takes the grant here without a statement. Its
// lease is counted from when that decision was sent, no later than the
// server started it; so it is a shorter first lease, which only a request
// whose lease a watchdog renews (driver.Request.Renewed) may be given: the
// others are handed over as to another process's waiters. A grant it cannot take as it stands (the owner asks
// with another limit or lease now, or the lease is spent) is confirmed as
// any other: semConfirm restarts its lease and checks the limit.

// semWait is an owner this Backend queued on a key.
type semWait struct {
	seq     uint64 // the notification count before the decision that queued it
	owner   []byte
	lease   time.Duration
	limit   int64
	renewed bool      // a watchdog renews the lease: it may start at the hand-over
	grant   *semGrant // a hand-over that started the lease, if any
}

// semGrant is a grant handed over to a semWait with its lease started.
type semGrant struct {
	token int64
	sent  time.Time // when the decision that handed it over was sent
}

// semQueued records that the decision on hash sent after notification seq
// queued req's owner (hex). A wait already recorded for the same request
// keeps its grant, if a hand-over started one.
func (b *Backend) semQueued(hash int64, ownerHex string, seq uint64, req driver.PermitRequest) {
	s := &b.sem
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waits == nil {
		s.waits = make(map[int64]map[string]*semWait)
	}
	ws := s.waits[hash]
	if ws == nil {
		ws = make(map[string]*semWait)
		s.waits[hash] = ws
	}
	if w := ws[ownerHex]; w != nil && w.lease == req.Lease && w.limit == req.Limit && w.renewed == req.Renewed {
		w.seq = seq
		return
	}
	ws[ownerHex] = &semWait{seq: seq, owner: []byte(req.Owner), lease: req.Lease, limit: req.Limit, renewed: req.Renewed}
}

// semQueuedAt returns the notification count before the decision that
// queued owner (hex) on hash, if this Backend queued it: a notification
// naming the owner after that may be a grant handed over, which the
// owner's next attempt confirms first.
func (b *Backend) semQueuedAt(hash int64, ownerHex string) (uint64, bool) {
	s := &b.sem
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.waits[hash][ownerHex]
	if w == nil {
		return 0, false
	}
	return w.seq, true
}

// semForget drops owner's (hex) wait on hash: it was granted, or left.
func (b *Backend) semForget(hash int64, ownerHex string) {
	s := &b.sem
	s.mu.Lock()
	defer s.mu.Unlock()
	if ws := s.waits[hash]; ws != nil {
		delete(ws, ownerHex)
		if len(ws) == 0 {
			delete(s.waits, hash)
		}
	}
}

// semLocal returns this Backend's waiters on hash for a decision about to
// be sent: their owners and leases (ms), the arguments of semHandOver's
// local owners, and the waits themselves for semStarted.
func (b *Backend) semLocal(hash int64) (owners [][]byte, leases []int64, waits []*semWait) {
	s := &b.sem
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.waits[hash] {
		if w.renewed && w.lease > 0 && w.grant == nil {
			owners = append(owners, w.owner)
			leases = append(leases, ms(w.lease))
			waits = append(waits, w)
		}
	}
	return owners, leases, waits
}

// semStarted records the grants with their lease started that a committed
// decision, sent at sent, handed over to waits (semLocal's, at that time):
// owners and tokens as the statement returned them. The statement named
// them in no notification, so their watchers are woken here, once the
// grants are recorded. A wait forgotten or replaced meanwhile (its owner
// was granted, released or queued afresh by another decision) does not
// take the grant; its owner, woken all the same, confirms whatever it
// holds as after a notification.
func (b *Backend) semStarted(hash int64, waits []*semWait, owners [][]byte, tokens []int64, sent time.Time) {
	if len(owners) == 0 || len(owners) != len(tokens) {
		return
	}
	named := make([]string, len(owners))
	s := &b.sem
	s.mu.Lock()
	ws := s.waits[hash]
	for i, o := range owners {
		named[i] = hex.EncodeToString(o)
		if w := ws[named[i]]; w != nil && containsWait(waits, w) {
			w.grant = &semGrant{token: tokens[i], sent: sent}
		}
	}
	s.mu.Unlock()
	b.wakeNamed(hash, named)
}

// semHanded is what a decision hands over to this Backend's waiters: the
// waits it was sent for and when (prepare, as the batch is built), and the
// owners and tokens of the grants it started (scanned from its result).
// They are recorded (record) only once its transaction has committed.
type semHanded struct {
	waits  []*semWait
	sent   time.Time
	owners [][]byte
	tokens []int64
}

// prepare returns the local owners and leases to send with a decision on
// hash (semHandOver's local and leases).
func (h *semHanded) prepare(b *Backend, hash int64) (local [][]byte, leases []int64) {
	local, leases, h.waits = b.semLocal(hash)
	h.sent = time.Now()
	return local, leases
}

// record keeps the grants a committed decision started (semStarted).
func (h *semHanded) record(b *Backend, hash int64) {
	b.semStarted(hash, h.waits, h.owners, h.tokens, h.sent)
}

func containsWait(waits []*semWait, w *semWait) bool {
	for _, x := range waits {
		if x == w {
			return true
		}
	}
	return false
}

// semTake returns the grant a hand-over started for owner's (hex) wait on
// hash, with the lease it has left, and forgets the wait; ok is false if
// there is none the owner can take as it asks now (with limit and lease).
func (b *Backend) semTake(hash int64, ownerHex string, limit int64, lease time.Duration) (token int64, left time.Duration, ok bool) {
	s := &b.sem
	s.mu.Lock()
	defer s.mu.Unlock()
	ws := s.waits[hash]
	w := ws[ownerHex]
	if w == nil || w.grant == nil || w.limit != limit || w.lease != lease {
		return 0, 0, false
	}
	if left = lease - time.Since(w.grant.sent); left <= 0 {
		return 0, 0, false
	}
	delete(ws, ownerHex)
	if len(ws) == 0 {
		delete(s.waits, hash)
	}
	return w.grant.token, left, true
}
