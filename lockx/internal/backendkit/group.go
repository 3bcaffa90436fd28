package backendkit

import (
	"context"
	"sync"
)

// Group tracks the goroutines a backend starts — its listeners, loss
// callbacks, background calls — so that Close can end and wait for every
// one of them: a goroutine left running after Close would outlive the
// backend's connections and leak in its users' tests.
//
// Go after Close starts nothing, so that a goroutine cannot slip in while
// Close waits. Context is cancelled by Close: the goroutines' calls use it
// (or a context made from it) so that Close ends them instead of waiting
// out their timeouts. The zero value is an empty, open Group.
type Group struct {
	mu     sync.Mutex
	wg     sync.WaitGroup
	closed bool
	ctx    context.Context
	cancel context.CancelFunc
}

// Go runs fn on a new goroutine that Close waits for, and reports whether
// it did: after Close it runs nothing and returns false.
func (g *Group) Go(fn func()) bool {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return false
	}
	g.wg.Add(1)
	g.mu.Unlock()
	go func() {
		defer g.wg.Done()
		fn()
	}()
	return true
}

// Enter counts the calling goroutine in the group, as if Go had started
// it — for work that runs on a goroutine the backend does not start
// itself, such as a timer's function — and reports whether it did: after
// Close (or Cancel) it counts nothing and returns false. A goroutine that
// entered calls Exit when it is done.
func (g *Group) Enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	return true
}

// Exit ends what Enter began.
func (g *Group) Exit() { g.wg.Done() }

// Context returns a context that Close cancels.
func (g *Group) Context() context.Context {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.initLocked()
	return g.ctx
}

// Done returns a channel that Close closes.
func (g *Group) Done() <-chan struct{} { return g.Context().Done() }

func (g *Group) initLocked() {
	if g.ctx == nil {
		g.ctx, g.cancel = context.WithCancel(context.Background())
	}
}

// Closed reports whether Close (or Cancel) has been called.
func (g *Group) Closed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// Shut is the start of a backend's Close: with mu held it marks the group
// closed — Go and Enter start nothing from then on — and runs locked, the
// backend's own shutdown under its mutex (mark itself closed, stop its
// timers), so that no call that sees the backend open under mu can start a
// goroutine after Close has begun. It reports false, running nothing, if
// the group was shut (or cancelled) before: Close is idempotent. Shut
// neither cancels Context nor waits: the backend calls Cancel (inside
// locked, or later) and Wait, or Close, when its own order needs.
func (g *Group) Shut(mu sync.Locker, locked func()) bool {
	mu.Lock()
	defer mu.Unlock()
	g.mu.Lock()
	first := !g.closed
	g.closed = true
	g.mu.Unlock()
	if first {
		locked()
	}
	return first
}

// Cancel refuses new goroutines and cancels Context, without waiting. A
// backend whose goroutines need more than Context to end (a blocked read to
// interrupt) calls Cancel, ends them, then Wait.
func (g *Group) Cancel() {
	g.mu.Lock()
	g.closed = true
	g.initLocked()
	g.cancel()
	g.mu.Unlock()
}

// Wait waits for every goroutine started by Go to return. Call it after
// Cancel (or use Close), else a Go may start another one meanwhile; not from
// a goroutine of the group.
func (g *Group) Wait() { g.wg.Wait() }

// Close is Cancel followed by Wait. It may be called more than once and
// from several goroutines (all wait).
func (g *Group) Close() {
	g.Cancel()
	g.Wait()
}
