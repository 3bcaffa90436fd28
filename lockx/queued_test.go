package lockx_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// queuer is a one-key backend that queues every refused waiter and wakes it
// through Watch on release, remembering a wake-up owed to a waiter that has
// not watched yet: the promise driver.Result.Queued makes, when queued is
// set.
type queuer struct {
	queued bool

	mu       sync.Mutex
	holder   driver.Owner
	token    driver.Token
	attempts int
	owed     map[driver.Owner]bool
	watchers map[driver.Owner]chan struct{}
}

func newQueuer(queued bool) *queuer {
	return &queuer{queued: queued, owed: map[driver.Owner]bool{}, watchers: map[driver.Owner]chan struct{}{}}
}

func (q *queuer) Acquire(_ context.Context, req driver.Request) (driver.Result, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.attempts++
	if q.holder == "" || q.holder == req.Owner {
		q.holder = req.Owner
		q.token++
		return driver.Result{Acquired: true, Token: q.token, TTL: req.Lease}, nil
	}
	q.owed[req.Owner] = false
	return driver.Result{TTL: time.Minute, Queued: q.queued}, nil
}

func (q *queuer) Release(_ context.Context, _ string, owner driver.Owner) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.holder != owner {
		return driver.ErrNotHeld
	}
	q.holder = ""
	for w := range q.owed {
		q.owed[w] = true
		if ch := q.watchers[w]; ch != nil {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	return nil
}

func (q *queuer) Watch(_ context.Context, _ string, owner driver.Owner) (<-chan struct{}, func(), error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	ch := make(chan struct{}, 1)
	if q.owed[owner] {
		ch <- struct{}{}
	}
	q.watchers[owner] = ch
	return ch, func() {
		q.mu.Lock()
		if q.watchers[owner] == ch {
			delete(q.watchers, owner)
		}
		q.mu.Unlock()
	}, nil
}

func (q *queuer) Extend(context.Context, string, driver.Owner, time.Duration) error { return nil }
func (q *queuer) TTL(context.Context, string, driver.Owner) (time.Duration, error) {
	return time.Minute, nil
}
func (q *queuer) Close() error { return nil }

func (q *queuer) attemptCount() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.attempts
}

// A refusal that says the backend queued the waiter (driver.Result.Queued)
// is followed by the wait at once: one attempt before the release, one
// after. Without it the waiter tries a second time before it waits.
func TestQueuedRefusalSkipsSecondAttempt(t *testing.T) {
	for _, tc := range []struct {
		queued bool
		before int // attempts by the waiter before the release
	}{{true, 1}, {false, 2}} {
		q := newQueuer(tc.queued)
		// Two Clients, as two processes: a Client queues its own
		// goroutines for a key locally.
		hc, c := lockx.New(q), lockx.New(q)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		held, err := hc.Acquire(ctx, "k", lockx.WithLease(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			l, err := c.Acquire(ctx, "k", lockx.WithLease(time.Minute), lockx.WithBackoff(time.Minute, time.Minute))
			if err == nil {
				err = l.Release(ctx)
			}
			got <- err
		}()
		// The waiter is waiting once its attempts stop growing.
		deadline := time.Now().Add(5 * time.Second)
		for q.attemptCount() < 1+tc.before && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
		if n := q.attemptCount() - 1; n != tc.before {
			t.Errorf("queued=%v: %d attempts before the release, want %d", tc.queued, n, tc.before)
		}
		if err := held.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil {
			t.Fatalf("queued=%v: waiter: %v", tc.queued, err)
		}
		if n := q.attemptCount() - 1; n != tc.before+1 {
			t.Errorf("queued=%v: %d attempts in all, want %d", tc.queued, n, tc.before+1)
		}
		cancel()
		_ = c.Close()
		_ = hc.Close()
	}
}
