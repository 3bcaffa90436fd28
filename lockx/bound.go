package lockx

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
)

// errBudget is the cause of a backend call cut off by the wait budget.
var errBudget = errors.New("lockx: wait budget spent")

// abandonGrace is how long a caller whose wait has ended stays for the
// withdrawal of its attempt (abandon) before leaving it to finish in the
// background: long enough for a healthy backend, so that a caller that
// gave up is off the queue when it returns, short enough to keep WithWait's
// promise of returning within the budget plus 100 ms when the backend is
// down or hanging.
const abandonGrace = 25 * time.Millisecond

// bounded runs call with ctx limited to deadline and returns its value, or
// gives up when ctx ends or at the deadline, whatever the call does, with
// the cause (errBudget at the deadline): a backend
// may honour the deadline late or not at all (go-redis, for one, answers a
// cancelled context only once its own read timeout has passed). A call
// left running is the Client's (Close waits for it); when it returns, late
// gets its value, to free whatever it obtained. A zero deadline calls
// directly.
func bounded[T any](ctx context.Context, c *Client, deadline time.Time, call func(context.Context) T, late func(T)) (v T, gaveUp error) {
	if deadline.IsZero() {
		return call(ctx), nil
	}
	cctx, cancel := context.WithDeadlineCause(ctx, deadline, errBudget)
	var (
		mu   sync.Mutex
		gone bool
		out  = make(chan T, 1)
	)
	c.bg.add()
	go func() {
		defer c.bg.done()
		// cctx ends only after the value is handed over: a caller that saw
		// it end first would take a call that returned in time for one cut
		// off, and late would free a grant the caller goes on to hold.
		defer cancel()
		v := call(cctx)
		mu.Lock()
		if !gone {
			out <- v // buffered: the caller takes it, now or at its deadline
			mu.Unlock()
			return
		}
		mu.Unlock()
		late(v)
	}()
	select {
	case v := <-out:
		return v, nil
	case <-cctx.Done():
	}
	mu.Lock()
	defer mu.Unlock()
	select {
	case v := <-out: // it returned as the deadline passed
		return v, nil
	default:
		gone = true
		return v, context.Cause(cctx)
	}
}

// budgetCut reports whether err is a backend's answer to the wait budget's
// deadline (bounded's context ending with errBudget) rather than a failure
// of its own: the caller reports the budget, not a context error the
// caller's own context did not have.
func budgetCut(ctx context.Context, deadline time.Time, err error) bool {
	return err != nil && !deadline.IsZero() && ctx.Err() == nil && !time.Now().Before(deadline)
}

// attempt is one backend Acquire, bounded by deadline (see bounded). A
// call cut off there is an unknown outcome, reported as ErrUnavailable;
// whatever it later obtains is released. Without a deadline it is a plain
// call: bounded's closures would escape to the heap even then.
func (c *Client) attempt(ctx context.Context, ops *driver.GrantOps, req driver.Request, deadline time.Time) (driver.Result, error) {
	if deadline.IsZero() {
		return ops.Acquire(ctx, req)
	}
	type result struct {
		res driver.Result
		err error
	}
	r, gaveUp := bounded(ctx, c, deadline, func(ctx context.Context) result {
		res, err := ops.Acquire(ctx, req)
		return result{res, err}
	}, func(result) { abandonNow(ops, req) })
	if gaveUp != nil {
		return driver.Result{}, driver.Unavailable("acquire", gaveUp)
	}
	if budgetCut(ctx, deadline, r.err) {
		return driver.Result{}, driver.Unavailable("acquire", errBudget)
	}
	return r.res, r.err
}

// abandon withdraws req in the background (abandonNow), waiting for it at
// most abandonGrace. The withdrawal is the Client's: Close waits for it.
func (c *Client) abandon(ops *driver.GrantOps, req driver.Request) {
	done := make(chan struct{})
	c.bg.add()
	go func() {
		defer c.bg.done()
		defer close(done)
		abandonNow(ops, req)
	}()
	t := time.NewTimer(abandonGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// abandonNow withdraws from a queue and frees a grant that may have
// happened behind an unanswered attempt. Release is owner-checked, so it
// can never free another owner's lock.
func abandonNow(ops *driver.GrantOps, req driver.Request) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = ops.Release(ctx, req.Key, req.Owner)
}

// calls counts the backend calls that bounded and abandon left running,
// so that Close can wait for them.
type calls struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0
}

func (g *calls) add() {
	g.mu.Lock()
	if g.n == 0 {
		g.idle = make(chan struct{})
	}
	g.n++
	g.mu.Unlock()
}

func (g *calls) done() {
	g.mu.Lock()
	g.n--
	if g.n == 0 {
		close(g.idle)
	}
	g.mu.Unlock()
}

// wait waits for the calls running, at most d: their contexts have ended,
// so only a backend that ignores its context keeps one longer.
func (g *calls) wait(d time.Duration) {
	g.mu.Lock()
	if g.n == 0 {
		g.mu.Unlock()
		return
	}
	idle := g.idle
	g.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	}
}
