package lockx

import (
	"context"
	"sync"
	"time"
)

// gates queue the goroutines of one process that contend for a key, so only
// one of them at a time contends on the backend (LocalFirst).
type gates struct {
	mu sync.Mutex
	m  map[string]*gate
}

type gate struct {
	ch   chan struct{} // capacity 1: a token means "entered"
	refs int
}

func (g *gates) init() { g.m = make(map[string]*gate) }

// enter waits for key's gate and returns the function that leaves it.
func (g *gates) enter(ctx context.Context, key string, wait bool, budget <-chan time.Time, done <-chan struct{}) (func(), error) {
	g.mu.Lock()
	gt := g.m[key]
	if gt == nil {
		gt = &gate{ch: make(chan struct{}, 1)}
		g.m[key] = gt
	}
	gt.refs++
	g.mu.Unlock()

	drop := func() {
		g.mu.Lock()
		gt.refs--
		if gt.refs == 0 {
			delete(g.m, key)
		}
		g.mu.Unlock()
	}
	leave := func() { <-gt.ch; drop() }
	if !wait {
		select {
		case gt.ch <- struct{}{}:
			return leave, nil
		default:
			drop()
			return nil, ErrNotAcquired
		}
	}
	select {
	case gt.ch <- struct{}{}:
		return leave, nil
	case <-ctx.Done():
		drop()
		return nil, joinErr(ErrNotAcquired, context.Cause(ctx), nil)
	case <-budget:
		drop()
		return nil, ErrNotAcquired
	case <-done:
		drop()
		return nil, joinErr(ErrNotAcquired, ErrClosed, nil)
	}
}
