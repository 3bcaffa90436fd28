package backendkit

import "sync"

// Losses holds the callbacks registered for one hold's loss
// (driver.LossNotifier's NotifyLoss). Each runs at most once: Fire takes
// them all, Drop forgets them (a release is no loss), and a registration's
// stop may be called any number of times, before or after either.
//
// Losses is guarded by the backend's mutex mu, the one that guards the
// hold: Add, Fire and Drop are called with mu held, and the stop that Add
// returns takes mu itself. The zero value holds no callback.
type Losses struct {
	fns map[*lossReg]struct{}
}

type lossReg struct{ fn func() }

// Add registers fn and returns its stop. Callers hold mu.
func (l *Losses) Add(mu sync.Locker, fn func()) (stop func()) {
	r := &lossReg{fn: fn}
	if l.fns == nil {
		l.fns = make(map[*lossReg]struct{})
	}
	l.fns[r] = struct{}{}
	var once sync.Once
	return func() {
		once.Do(func() {
			mu.Lock()
			delete(l.fns, r)
			mu.Unlock()
		})
	}
}

// Fire starts every registered callback on g, each on its own goroutine
// (a callback may call back into the backend, whose mutex the caller
// holds), and forgets them. Callers hold mu.
func (l *Losses) Fire(g *Group) {
	for r := range l.fns {
		g.Go(r.fn)
	}
	l.fns = nil
}

// Take forgets every registered callback and returns them, for a backend
// that runs them itself once it has released mu. Callers hold mu.
func (l *Losses) Take() []func() {
	fns := make([]func(), 0, len(l.fns))
	for r := range l.fns {
		fns = append(fns, r.fn)
	}
	l.fns = nil
	return fns
}

// Drop forgets every registered callback without running it. Callers hold
// mu.
func (l *Losses) Drop() { l.fns = nil }

// Len returns how many callbacks are registered. Callers hold mu.
func (l *Losses) Len() int { return len(l.fns) }
