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

// Closed reports whether Close has been called.
func (g *Group) Closed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// Close refuses new goroutines, cancels Context and waits for every
// goroutine started by Go to return. It may be called more than once and
// from several goroutines (all wait); not from a goroutine of the group.
func (g *Group) Close() {
	g.mu.Lock()
	g.closed = true
	g.initLocked()
	g.cancel()
	g.mu.Unlock()
	g.wg.Wait()
}
