package lockx

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
)

// watchdog renews the leases of a client's watchdog-mode locks at a third
// of their validity. One goroutine per client serves every lock; it runs
// while there is a lock to renew (and watchdogLinger longer), and renews
// all locks that are due (or nearly due) together, in one round trip when
// the backend is a BatchExtender — or in one round trip per independent
// group, concurrently, when it is also an ExtendPartitioner (renew).
type watchdog struct {
	c       *Client
	mu      sync.Mutex
	set     map[*hold]struct{}
	running bool
	// wakeAt is when the sleeping loop wakes next (zero while it is
	// awake): add kicks it only for a hold due before that, so taking a
	// lock whose renewal comes after the next wake-up costs no wake-up.
	wakeAt time.Time
	// idleSince is when the loop first found no lock to renew (zero while
	// it has some): it ends once that has lasted linger.
	idleSince time.Time
	linger    time.Duration // watchdogLinger; tests shorten it
	starts    atomic.Int64  // goroutines started (tests)
	kicks     atomic.Int64  // wake-ups by kick (tests)
	kick      chan struct{}
	base      context.Context // cancelled by stop: ends the loop and in-flight renewals
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	stopped   bool
}

func (w *watchdog) init(c *Client) {
	w.c = c
	w.set = make(map[*hold]struct{})
	w.kick = make(chan struct{}, 1)
	w.linger = watchdogLinger
	w.base, w.cancel = context.WithCancel(context.Background())
}

func (w *watchdog) add(h *hold) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	w.set[h] = struct{}{}
	if !w.running {
		w.running = true
		w.wakeAt = time.Time{}
		w.wg.Add(1)
		w.starts.Add(1)
		go w.loop()
		return
	}
	if !w.wakeAt.IsZero() {
		h.mu.Lock()
		wake := renewWake(h)
		h.mu.Unlock()
		if !wake.Before(w.wakeAt) {
			return
		}
	}
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

func (w *watchdog) remove(h *hold) {
	w.mu.Lock()
	delete(w.set, h)
	w.mu.Unlock()
}

// stop ends the goroutine and waits for it. Called once, by Client.Close.
func (w *watchdog) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.cancel()
	w.wg.Wait()
}

// batchWindow: the watchdog wakes this fraction of the earliest lease before
// that lock's renewal is due, and renews with it every lock due within the
// same fraction after it, rather than on its own a moment later. Waking
// early gives the renewal time to land; collecting past the earliest due
// time is what makes batches: locks taken a few milliseconds apart would
// otherwise each get a round trip of their own in every period.
const batchWindow = 12

// watchdogLinger is how long the loop goes on after it first found no lock
// to renew (it looks when it wakes, for a renewal or a kick). A
// goroutine that ended with every release would be started again by the
// next acquisition: on a hot key, where a client takes and frees a lock
// many times a second and often frees it before the new goroutine has run,
// that is a goroutine started (and a thread woken for it) per acquisition.
const watchdogLinger = time.Second

// renewWake is when the loop wakes for h's renewal: one window before it is
// due (collect then renews it with every lock due within the next window).
// Callers hold h.mu.
func renewWake(h *hold) time.Time { return h.nextRenew.Add(-h.period / batchWindow) }

func (w *watchdog) loop() {
	defer w.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		due, wait, ok := w.collect(time.Now())
		if !ok {
			return
		}
		if len(due) > 0 {
			w.renew(due)
			continue
		}
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-w.kick:
			w.kicks.Add(1)
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		case <-w.base.Done():
			return
		}
	}
}

// collect returns the holds due now and, if none, how long until the next
// one. ok is false when there is nothing left to watch: the goroutine ends
// and add starts a new one later.
func (w *watchdog) collect(now time.Time) (due []*hold, wait time.Duration, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		w.running = false
		return nil, 0, false
	}
	if len(w.set) == 0 {
		if w.idleSince.IsZero() {
			w.idleSince = now
		}
		if idle := now.Sub(w.idleSince); idle < w.linger {
			w.wakeAt = now.Add(w.linger - idle)
			return nil, w.linger - idle, true
		}
		w.running = false
		w.idleSince = time.Time{}
		return nil, 0, false
	}
	w.idleSince = time.Time{}
	wait = time.Hour
	for h := range w.set {
		h.mu.Lock()
		left := h.nextRenew.Sub(now)
		until := renewWake(h).Sub(now)
		switch {
		case h.renewing: // its group's call has not returned yet
		case left <= 2*(h.period/batchWindow):
			h.renewing = true
			h.renewFrom = now
			due = append(due, h)
		case until < wait:
			wait = until
		}
		h.mu.Unlock()
	}
	if len(due) > 0 {
		w.wakeAt = time.Time{} // renews, then collects again at once
	} else {
		w.wakeAt = now.Add(wait)
	}
	return due, wait, true
}

// renew starts the renewal of due, which collect marked as renewing: one
// goroutine per independent group, each owned by the watchdog (w.wg) and
// ended by its call, bounded by the group's earliest local validity. The
// loop does not wait for them, so a renewal stalled on one node delays
// neither the renewals of other groups nor the next period's: a group's
// holds stay out of collect until its call returns, which kicks the loop.
//
// Plain locks go to the backend's ExtendMany, split into the groups of its
// ExtendPartitioner when it has one; the other holds (pattern grants, or a
// backend without BatchExtender) are extended one by one in a group of
// their own.
func (w *watchdog) renew(due []*hold) {
	var batch, single []*hold
	for _, h := range due {
		if h.plain && w.c.batch != nil {
			batch = append(batch, h)
		} else {
			single = append(single, h)
		}
	}
	if len(single) > 0 {
		w.start(single, false)
	}
	if len(batch) == 0 {
		return
	}
	part := w.c.partition
	if part == nil {
		w.start(batch, true)
		return
	}
	reqs := extendRequests(batch)
	ctx, cancel := context.WithDeadline(w.base, earliestValidity(batch))
	groups := part.PartitionExtends(ctx, reqs)
	cancel()
	if !isPartition(groups, len(batch)) {
		w.start(batch, true)
		return
	}
	for _, g := range groups {
		hs := make([]*hold, len(g))
		for j, i := range g {
			hs[j] = batch[i]
		}
		w.start(hs, true)
	}
}

// isPartition reports whether groups holds each of 0..n-1 exactly once, in
// non-empty groups: anything else from a backend is ignored (one group).
func isPartition(groups [][]int, n int) bool {
	seen := make([]bool, n)
	count := 0
	for _, g := range groups {
		if len(g) == 0 {
			return false
		}
		for _, i := range g {
			if i < 0 || i >= n || seen[i] {
				return false
			}
			seen[i] = true
			count++
		}
	}
	return count == n
}

func extendRequests(hs []*hold) []driver.ExtendRequest {
	reqs := make([]driver.ExtendRequest, len(hs))
	for i, h := range hs {
		h.mu.Lock()
		reqs[i] = driver.ExtendRequest{Key: h.key, Owner: h.owner, Lease: h.lease}
		h.mu.Unlock()
	}
	return reqs
}

// earliestValidity returns the earliest local validity of hs: no renewal
// is worth waiting for past it.
func earliestValidity(hs []*hold) time.Time {
	deadline := time.Now().Add(time.Hour)
	for _, h := range hs {
		h.mu.Lock()
		if h.validUntil.Before(deadline) {
			deadline = h.validUntil
		}
		h.mu.Unlock()
	}
	return deadline
}

// start renews hs in a goroutine of the watchdog: in one ExtendMany if
// batched, else one Extend after another.
func (w *watchdog) start(hs []*hold, batched bool) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.renewGroup(hs, batched)
		// The group leaves the renewing state at once, under w.mu, which
		// collect holds while it looks: a collect that ran between two of
		// these updates would see part of a group due and split a batch
		// that belongs together (renewals slower than 2 windows, under load).
		w.mu.Lock()
		for _, h := range hs {
			h.mu.Lock()
			h.renewing = false
			h.mu.Unlock()
		}
		w.mu.Unlock()
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}()
}

func (w *watchdog) renewGroup(due []*hold, batched bool) {
	reqs := extendRequests(due)
	ctx, cancel := context.WithDeadline(w.base, earliestValidity(due))
	defer cancel()
	start := time.Now()
	errs := make([]error, len(reqs))
	if batched {
		berrs := w.c.batch.ExtendMany(ctx, reqs)
		for i := range errs {
			if i < len(berrs) {
				errs[i] = berrs[i]
			} else {
				errs[i] = driver.Unavailable("extend", errors.New("batch returned too few results"))
			}
		}
	} else {
		for i, h := range due {
			errs[i] = h.ops.Extend(ctx, reqs[i].Key, reqs[i].Owner, reqs[i].Lease)
		}
	}
	for i, h := range due {
		err := errs[i]
		h.observeExtend(ctx, true, start, err)
		switch {
		case err == nil:
			h.renewed(start, reqs[i].Lease)
		case isNotHeld(err):
			h.markLost("renewal: not held")
		default:
			// Unknown outcome: retry soon; the validity timer declares the
			// lock lost if no renewal lands in time.
			h.mu.Lock()
			h.nextRenew = time.Now().Add(min(h.lease/10, time.Second))
			h.mu.Unlock()
			if l := h.logger; l != nil {
				l.Warn("lockx: lease renewal failed", "key", h.key, "err", err)
			}
		}
	}
}
