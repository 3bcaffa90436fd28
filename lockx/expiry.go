package lockx

import (
	"sync"
	"time"
)

// expiries is the Client's validity timer: one timer for every hold, which
// declares lost each hold whose local validity (validUntil) has passed
// without a renewal.
//
// A timer per hold would cost an allocation and, worse, a wake-up of
// another thread on every acquisition: arming a Go timer wakes the
// runtime's network poller (or an idle processor) so that it learns of the
// new deadline, which on a busy machine costs a pair of locks more than
// the rest of the client's bookkeeping together. Here a hold only joins a
// heap ordered by validUntil, and the timer is re-armed only when a hold's
// validity ends before the timer's next firing: with one lease for every
// lock, about once per lease. A hold that ends leaves the heap; the timer
// may then fire for nothing, and re-arms for the earliest hold left.
//
// Lock order: e.mu is innermost. A hold's h.mu may be held when calling
// add, update and remove (so that a hold that has finished never joins),
// and fire takes h.mu only after releasing e.mu.
type expiries struct {
	mu    sync.Mutex
	heap  []expiry    // earliest first; hold.expIdx is its index
	timer *time.Timer // made at the first add
	at    time.Time   // when the timer fires; zero: not armed
}

// An expiry is one hold in the heap and its validity as last scheduled.
type expiry struct {
	at time.Time
	h  *hold
}

// add schedules h to be checked at until (its validUntil).
func (e *expiries) add(h *hold, until time.Time) {
	e.mu.Lock()
	h.expIdx = len(e.heap)
	e.heap = append(e.heap, expiry{until, h})
	e.up(h.expIdx)
	e.armBy(until)
	e.mu.Unlock()
}

// update moves h's check to until, a renewal's new validity, if h is in
// the heap (a hold that fire took out is checked by fire itself).
func (e *expiries) update(h *hold, until time.Time) {
	e.mu.Lock()
	if i := h.expIdx; i >= 0 {
		e.heap[i].at = until
		if !e.up(i) {
			e.down(i)
		}
		e.armBy(until)
	}
	e.mu.Unlock()
}

// remove takes h out of the heap, if it is there. The timer is left as it
// is: a firing for nothing costs less than stopping and re-arming it.
func (e *expiries) remove(h *hold) {
	e.mu.Lock()
	if i := h.expIdx; i >= 0 {
		e.take(i)
	}
	e.mu.Unlock()
}

// stop stops the timer (Client.Close).
func (e *expiries) stop() {
	e.mu.Lock()
	if e.timer != nil {
		e.timer.Stop()
	}
	e.at = time.Time{}
	e.mu.Unlock()
}

// armBy makes the timer fire by t at the latest. Callers hold e.mu.
func (e *expiries) armBy(t time.Time) {
	if !e.at.IsZero() && !t.Before(e.at) {
		return
	}
	e.at = t
	if e.timer == nil {
		e.timer = time.AfterFunc(time.Until(t), e.fire)
	} else {
		e.timer.Reset(time.Until(t))
	}
}

// fire takes out every hold whose scheduled validity has passed and re-arms
// the timer for the earliest left. Each hold taken out is declared lost,
// unless it has finished or a renewal moved its validity meanwhile (it
// then goes back in).
func (e *expiries) fire() {
	now := time.Now()
	var due []*hold
	e.mu.Lock()
	e.at = time.Time{}
	for len(e.heap) > 0 && !e.heap[0].at.After(now) {
		due = append(due, e.heap[0].h)
		e.take(0)
	}
	if len(e.heap) > 0 {
		e.armBy(e.heap[0].at)
	}
	e.mu.Unlock()
	for _, h := range due {
		h.mu.Lock()
		if h.finished {
			h.mu.Unlock()
			continue
		}
		if h.validUntil.After(now) { // renewed meanwhile
			e.add(h, h.validUntil)
			h.mu.Unlock()
			continue
		}
		h.mu.Unlock()
		h.markLost("lease expired locally before renewal")
	}
}

// take removes the heap's entry i. Callers hold e.mu.
func (e *expiries) take(i int) {
	last := len(e.heap) - 1
	e.heap[i].h.expIdx = -1
	if i != last {
		e.heap[i] = e.heap[last]
		e.heap[i].h.expIdx = i
	}
	e.heap[last] = expiry{}
	e.heap = e.heap[:last]
	if i != last && !e.up(i) {
		e.down(i)
	}
}

// up moves entry i towards the root while it is earlier than its parent
// and reports whether it moved. Callers hold e.mu.
func (e *expiries) up(i int) bool {
	moved := false
	for i > 0 {
		p := (i - 1) / 2
		if !e.heap[i].at.Before(e.heap[p].at) {
			break
		}
		e.swap(i, p)
		i, moved = p, true
	}
	return moved
}

// down moves entry i towards the leaves while a child is earlier. Callers
// hold e.mu.
func (e *expiries) down(i int) {
	n := len(e.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		c := l
		if r := l + 1; r < n && e.heap[r].at.Before(e.heap[l].at) {
			c = r
		}
		if !e.heap[c].at.Before(e.heap[i].at) {
			return
		}
		e.swap(i, c)
		i = c
	}
}

func (e *expiries) swap(i, j int) {
	e.heap[i], e.heap[j] = e.heap[j], e.heap[i]
	e.heap[i].h.expIdx = i
	e.heap[j].h.expIdx = j
}
