package lockx

import (
	"context"
	"errors"
	"sync"
	"time"
)

// watchdog renews the leases of a client's watchdog-mode locks at lease/3.
// One goroutine per client serves every lock; it runs only while there is a
// lock to renew, and renews all locks that are due (or nearly due) together,
// in one round trip when the backend is a BatchExtender.
type watchdog struct {
	c       *Client
	mu      sync.Mutex
	set     map[*hold]struct{}
	running bool
	kick    chan struct{}
	base    context.Context // cancelled by stop: ends the loop and in-flight renewals
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	stopped bool
}

func (w *watchdog) init(c *Client) {
	w.c = c
	w.set = make(map[*hold]struct{})
	w.kick = make(chan struct{}, 1)
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
		w.wg.Add(1)
		go w.loop()
		return
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
	if w.stopped || len(w.set) == 0 {
		w.running = false
		return nil, 0, false
	}
	wait = time.Hour
	for h := range w.set {
		h.mu.Lock()
		left := h.nextRenew.Sub(now)
		window := h.lease / batchWindow
		h.mu.Unlock()
		if left <= 2*window {
			due = append(due, h)
		} else if left-window < wait {
			wait = left - window
		}
	}
	return due, wait, true
}

func (w *watchdog) renew(due []*hold) {
	reqs := make([]ExtendRequest, len(due))
	deadline := time.Now().Add(time.Hour)
	for i, h := range due {
		h.mu.Lock()
		reqs[i] = ExtendRequest{Key: h.key, Owner: h.owner, Lease: h.lease}
		if h.validUntil.Before(deadline) {
			deadline = h.validUntil
		}
		h.mu.Unlock()
	}
	// No renewal is worth waiting for past the earliest local validity.
	ctx, cancel := context.WithDeadline(w.base, deadline)
	defer cancel()
	start := time.Now()
	errs := make([]error, len(reqs))
	var batch []int // plain locks, renewed in one round trip if the backend can
	for i, h := range due {
		if h.plain && w.c.batch != nil {
			batch = append(batch, i)
			continue
		}
		errs[i] = h.ops.Extend(ctx, reqs[i].Key, reqs[i].Owner, reqs[i].Lease)
	}
	if len(batch) > 0 {
		breqs := make([]ExtendRequest, len(batch))
		for j, i := range batch {
			breqs[j] = reqs[i]
		}
		berrs := w.c.batch.ExtendMany(ctx, breqs)
		for j, i := range batch {
			if j < len(berrs) {
				errs[i] = berrs[j]
			} else {
				errs[i] = Unavailable("extend", errors.New("batch returned too few results"))
			}
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
