package pglock

import (
	"sync"
	"time"
)

// Local answers to refused retries of queued read/write and semaphore
// waiters. A fair waiter is refused at its first attempt (which queues
// it), again right after it registers for its wake-up, and again at every
// backoff timer while it waits its turn: each a decision transaction
// serialised on the key's decision lock, although nothing has changed for
// it. Every change that can let a queued waiter in is announced by a NOTIFY
// that names it (or wakes every watcher of the key): the releases and
// grants compute who can now be granted (sqlRWWake, semWake). So while
// nothing has named the waiter since its last refused decision was sent,
// the listener has been listening throughout and no lease can have ended,
// the backend answers the retry itself. The answer is only ever a refusal,
// and it stands for refusalCache at most, which bounds the delay for what
// no NOTIFY announces (a crashed waiter's queue entry running out).
const refusalCache = 200 * time.Millisecond

type refusals struct {
	mu    sync.Mutex
	seq   uint64             // counts notifications
	reset uint64             // seq of the last wake-everyone (listener reconnect)
	named map[string]note    // owner hex -> the last notification naming it
	all   map[int64]note     // hash -> the last notification waking every watcher
	by    map[string]refusal // owner hex -> its last refused decision
}

type note struct {
	seq uint64
	at  time.Time
}

// refusal is a refused decision: its request, the notification count
// before it was sent, and until when it may be answered locally.
type refusal struct {
	seq          uint64
	at, until    time.Time
	hash         int64
	kind, mode   int
	limit, count int64
	ttl          time.Duration // the blocking lease's remaining time, as refused
}

// noted records a notification on hash naming owners (hex), or waking
// every watcher if owners is empty.
func (r *refusals) noted(hash int64, owners []string) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	n := note{r.seq, now}
	if len(owners) == 0 {
		if r.all == nil {
			r.all = make(map[int64]note)
		}
		r.all[hash] = n
	}
	if r.named == nil {
		r.named = make(map[string]note)
	}
	for _, o := range owners {
		r.named[o] = n
	}
	if len(r.named)+len(r.all) > 1024 { // notes older than any cached refusal matter no more
		for o, x := range r.named {
			if now.Sub(x.at) > 2*refusalCache {
				delete(r.named, o)
			}
		}
		for h, x := range r.all {
			if now.Sub(x.at) > 2*refusalCache {
				delete(r.all, h)
			}
		}
	}
}

// wokeAll records that every watcher was woken (notifications may have
// been missed).
func (r *refusals) wokeAll() {
	r.mu.Lock()
	r.seq++
	r.reset = r.seq
	r.mu.Unlock()
}

// mark returns the notification count to record with a decision about to
// be sent; ok is false if the listener is not listening (notifications may
// be missed, so its refusal is not cached).
func (r *refusals) mark(b *Backend) (seq uint64, ok bool) {
	b.lst.mu.Lock()
	ok = b.lst.listening
	b.lst.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seq, ok
}

// refused caches owner's refused decision x, if it may be answered locally
// at all (a known blocking lease).
func (r *refusals) refused(owner string, x refusal) {
	if x.ttl <= 0 {
		return
	}
	x.at = time.Now()
	x.until = x.at.Add(min(x.ttl, refusalCache))
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.by == nil {
		r.by = make(map[string]refusal)
	}
	if len(r.by) > 1024 {
		now := time.Now()
		for o, y := range r.by {
			if now.After(y.until) {
				delete(r.by, o)
			}
		}
	}
	r.by[owner] = x
}

// cached returns the remaining lease of the blocker if owner's retry q (the
// same request on the same key) may be refused locally.
func (r *refusals) cached(owner string, q refusal) (time.Duration, bool) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	x, ok := r.by[owner]
	switch {
	case !ok:
		return 0, false
	case now.After(x.until), x.hash != q.hash, x.kind != q.kind, x.mode != q.mode, x.limit != q.limit, x.count != q.count,
		r.reset > x.seq, r.named[owner].seq > x.seq, r.all[x.hash].seq > x.seq:
		delete(r.by, owner)
		return 0, false
	}
	return max(x.ttl-now.Sub(x.at), 0), true
}

// forget drops owner's cached refusal (it was granted, or left).
func (r *refusals) forget(owner string) {
	r.mu.Lock()
	delete(r.by, owner)
	r.mu.Unlock()
}
