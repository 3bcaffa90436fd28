package etcdlock

import (
	"context"
	"sync"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/internal/backendkit"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// target is what a waiter watches: the deletion of one key, or of any key
// under a prefix, from a revision on (so nothing after the attempt's read
// is missed).
type target struct {
	key    string
	prefix bool
	from   int64
}

// waiter is one Watch registration. Its attempt arms an etcd watch on
// what blocks it (X); a deletion there sends the wake-up.
type waiter = backendkit.Watcher[*armed]

// armed is the etcd watch a waiter's attempt armed, if any.
type armed struct {
	mu    sync.Mutex
	cur   target
	stopW context.CancelFunc
	done  chan struct{}
}

// Watch registers owner's interest in key (lockx.Notifier). The etcd watch
// itself is opened by the attempt that follows, once it knows what to
// watch: the queue entry just ahead of the waiter (fair locks, queued
// read/write holds and fair permits), or the key's holders (plain waiters).
func (b *Backend) Watch(ctx context.Context, key string, owner driver.Owner) (<-chan struct{}, func(), error) {
	if b.cfg.err != nil {
		return nil, nil, b.cfg.err
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, nil, driver.Unavailable("watch", driver.ErrClosed)
	}
	w := b.waiters.Add(key, owner)
	w.X = &armed{}
	b.mu.Unlock()
	var once sync.Once
	cancel := func() {
		once.Do(func() {
			b.mu.Lock()
			b.waiters.Remove(key, w)
			b.mu.Unlock()
			w.X.stop()
			b.withdrawLater(key, owner)
		})
	}
	return w.C(), cancel, nil
}

// cancelGrace is how long a lock's queue entry outlives the end of its
// waiter's wait. The Client withdraws fair waiters itself (Release); a
// plain waiter whose context ended just stops, and its entry would hold
// up the queue until its queue TTL. A waiter that goes on waiting
// registers again at once, well within the grace.
const cancelGrace = 250 * time.Millisecond

// withdrawLater withdraws owner's lock queue entry of key if owner neither
// waits nor tries again within cancelGrace.
func (b *Backend) withdrawLater(key string, owner driver.Owner) {
	r := lockRef(key, owner)
	if b.getQueued(r) == nil {
		return
	}
	time.AfterFunc(cancelGrace, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		q := b.queued[r]
		if b.closed || q == nil || b.waiterLocked(key, owner) != nil || time.Since(q.touched) < cancelGrace {
			return
		}
		delete(b.queued, r)
		q.timer.Stop()
		rev, l := q.rev, q.lease
		b.g.Go(func() {
			ctx, cancel := context.WithTimeout(b.g.Context(), b.cfg.opTimeout)
			defer cancel()
			_, _ = b.deleteEntry(ctx, b.qkey(r), rev, l)
		})
	})
}

// waiting reports whether owner has a Watch registration for key: its
// attempts are contended ones, which read before they write.
func (b *Backend) waiting(key string, owner driver.Owner) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiterLocked(key, owner) != nil
}

// waiterLocked returns owner's Watch registration for key, nil if none (an
// owner waits for a key once at a time). Callers hold b.mu.
func (b *Backend) waiterLocked(key string, owner driver.Owner) *waiter {
	var found *waiter
	b.waiters.Owned(key, owner, func(w *waiter) { found = w })
	return found
}

// arm points owner's registration for key at t.
func (b *Backend) arm(key string, owner driver.Owner, t target) {
	b.mu.Lock()
	w := b.waiterLocked(key, owner)
	closed := b.closed
	b.mu.Unlock()
	if w == nil || closed {
		return
	}
	a := w.X
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.done != nil {
		if a.cur.key == t.key && a.cur.prefix == t.prefix {
			select {
			case <-a.done: // ended (an error woke the waiter): watch anew
			default:
				return // already watching it, from an earlier revision
			}
		}
		a.stopW()
		<-a.done
	}
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(b.g.Context()))
	opts := []clientv3.OpOption{clientv3.WithRev(t.from), clientv3.WithFilterPut()}
	if t.prefix {
		opts = append(opts, clientv3.WithPrefix())
	}
	wch := b.cli.Watch(ctx, t.key, opts...)
	done := make(chan struct{})
	a.cur, a.stopW, a.done = t, cancel, done
	started := b.g.Go(func() {
		defer close(done)
		for resp := range wch {
			if resp.Err() != nil || resp.Canceled {
				w.Wake() // compacted, no leader, closing: let the attempt look
				cancel()
				for range wch { // drain until the client closes the channel
				}
				return
			}
			for _, ev := range resp.Events {
				if ev.Type == mvccpb.DELETE {
					w.Wake()
					break
				}
			}
		}
	})
	if !started { // closed meanwhile: nothing watches
		cancel()
		for range wch { // the client closes the channel once cancelled
		}
		close(done)
	}
}

// stop ends the registration's etcd watch, if any, and waits for it.
func (a *armed) stop() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.done != nil {
		a.stopW()
		<-a.done
		a.done = nil
	}
}

// NotifyLoss calls fn when owner's lock on key is lost (lockx.LossNotifier):
// when its key is deleted — its lease expired or was revoked (a force
// release), or someone deleted it — as etcd reports through a watch on the
// key from the grant's revision. Holds shorter than WithLossWatchDelay open
// no watch. If owner does not hold key here, fn is called at once.
func (b *Backend) NotifyLoss(key string, owner driver.Owner, fn func()) (stop func()) {
	r := lockRef(key, owner)
	h := b.getHeld(r)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return func() {}
	}
	if h == nil {
		b.g.Go(fn)
		return func() {}
	}
	ctx, cancel := context.WithCancel(b.g.Context())
	hkey := h.key
	timer := time.AfterFunc(b.cfg.lossDelay, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.closed || ctx.Err() != nil {
			return
		}
		b.g.Go(func() {
			if b.watchLoss(ctx, hkey, h.rev) {
				fn()
			}
		})
	})
	return func() {
		timer.Stop()
		cancel()
	}
}

// watchLoss returns true when the entry key created at rev is gone, false
// when ctx ends first.
func (b *Backend) watchLoss(ctx context.Context, key string, rev int64) bool {
	from := rev + 1
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(ctx)
		wch := b.cli.Watch(wctx, key, clientv3.WithRev(from), clientv3.WithFilterPut())
		for resp := range wch {
			if resp.Err() != nil || resp.Canceled {
				break
			}
			for _, ev := range resp.Events {
				if ev.Type == mvccpb.DELETE {
					cancel()
					return true
				}
			}
		}
		cancel()
		if ctx.Err() != nil {
			return false
		}
		// The watch broke (compaction, a member lost): look at the key.
		gctx, gcancel := context.WithTimeout(ctx, b.cfg.opTimeout)
		resp, err := b.cli.Get(gctx, key)
		gcancel()
		if err != nil {
			select {
			case <-ctx.Done():
				return false
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != rev {
			return true
		}
		from = resp.Header.Revision + 1
	}
	return false
}
