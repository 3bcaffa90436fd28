package lockx

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
)

// gates queue the goroutines of one process that contend for a key, so only
// one of them at a time contends on the backend (LocalFirst), or reaches it
// for one explicit owner (the owner gates). A gate is handed to its waiters
// in arrival order.
type gates struct {
	mu sync.Mutex
	m  map[string]*gate
}

// gate is one key's gate, guarded by gates.mu. It lives while it is held.
type gate struct {
	key   string
	queue []*gateWaiter // in arrival order
	// passes counts the local passes in a row (see maxLocalPasses); any
	// other way of handing the gate on resets it.
	passes int
}

// gateWaiter is one caller waiting at a gate, guarded by gates.mu but for
// ready.
type gateWaiter struct {
	ready chan struct{} // closed when the gate is handed to the waiter
	state waiterState
	// owner and lease are what a local pass grants the waiter; owner is ""
	// for a waiter that takes no pass.
	owner Owner
	lease time.Duration
	got   passed // what the pass brought, once handed
}

type waiterState uint8

const (
	waiting waiterState = iota // in the queue
	claimed                    // off the queue: a pass to it is under way
	handed                     // the gate is its
	gone                       // gave up while claimed: the passer cleans up
)

// passed is a local pass's outcome for its waiter: the grant, and when the
// pass was sent, where the lease begins; res.Acquired is false when the
// waiter got the gate alone.
type passed struct {
	res   driver.Result
	start time.Time
}

func (g *gates) init() { g.m = make(map[string]*gate) }

// enter waits for key's gate and returns the function that leaves it.
func (g *gates) enter(ctx context.Context, key string, wait bool, budget <-chan time.Time, done <-chan struct{}) (func(), error) {
	gt, _, err := g.join(ctx, key, wait, budget, done, "", 0)
	if err != nil {
		return nil, err
	}
	return func() { g.leave(gt) }, nil
}

// join waits for key's gate, as enter, and returns it; the caller leaves it
// with leave. A waiter with an owner may be passed the lock with the gate
// (claim, handOver): p.res.Acquired says so.
func (g *gates) join(ctx context.Context, key string, wait bool, budget <-chan time.Time, done <-chan struct{}, owner Owner, lease time.Duration) (gt *gate, p passed, err error) {
	g.mu.Lock()
	gt = g.m[key]
	if gt == nil {
		gt = &gate{key: key}
		g.m[key] = gt
		g.mu.Unlock()
		return gt, p, nil
	}
	if !wait {
		g.mu.Unlock()
		return nil, p, ErrNotAcquired
	}
	w := &gateWaiter{ready: make(chan struct{}), owner: owner, lease: lease}
	gt.queue = append(gt.queue, w)
	g.mu.Unlock()
	select {
	case <-w.ready:
		return gt, w.got, nil
	case <-ctx.Done():
		err = joinErr(ErrNotAcquired, context.Cause(ctx), nil)
	case <-budget:
		err = ErrNotAcquired
	case <-done:
		err = joinErr(ErrNotAcquired, ErrClosed, nil)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	switch w.state {
	case handed: // as it gave up: it takes what it was handed
		return gt, w.got, nil
	case waiting:
		gt.queue = slices.DeleteFunc(gt.queue, func(x *gateWaiter) bool { return x == w })
	case claimed:
		w.state = gone
	}
	return nil, p, err
}

// leave hands gt to its next waiter, or frees it.
func (g *gates) leave(gt *gate) {
	g.mu.Lock()
	g.handOn(gt, passed{})
	g.mu.Unlock()
}

// handOn hands gt with p to the first waiter in its queue, or frees it if
// there is none. Callers hold g.mu.
func (g *gates) handOn(gt *gate, p passed) {
	gt.passes = 0
	if len(gt.queue) == 0 {
		delete(g.m, gt.key)
		return
	}
	w := gt.queue[0]
	gt.queue = slices.Delete(gt.queue, 0, 1)
	g.give(w, p)
}

// give hands the gate to w with p. Callers hold g.mu.
func (g *gates) give(w *gateWaiter, p passed) {
	w.got, w.state = p, handed
	close(w.ready)
}

// claim takes gt's first waiter off its queue for a local pass and returns
// it, if it takes passes and gt has not been passed maxLocalPasses times in
// a row; else nil. The caller holds gt and ends the pass with handOver.
func (g *gates) claim(gt *gate) *gateWaiter {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(gt.queue) == 0 || gt.queue[0].owner == "" || gt.passes >= maxLocalPasses {
		return nil
	}
	w := gt.queue[0]
	gt.queue = slices.Delete(gt.queue, 0, 1)
	w.state = claimed
	return w
}

// handOver ends a pass to w, claimed from gt: w gets gt, with the grant if
// p.res.Acquired. If w gave up meanwhile, gt goes on as leave hands it,
// without p, and handOver returns false: the caller frees what the pass may
// have granted w.
func (g *gates) handOver(gt *gate, w *gateWaiter, p passed) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if w.state == gone {
		g.handOn(gt, passed{})
		return false
	}
	if p.res.Acquired {
		gt.passes++
	} else {
		gt.passes = 0
	}
	g.give(w, p)
	return true
}
