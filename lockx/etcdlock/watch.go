package etcdlock

import (
	"context"
	"github.com/lockx-go/lockx/lockx/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"sync"
	"time"
)

type waitKey struct {
	key   string
	owner driver.Owner
}

// target is what a waiter watches: the deletion of one key, or of any key
// under a prefix, from a revision on (so nothing after the attempt's read
// is missed).
type target struct {
	key    string
	prefix bool
	from   int64
}

// waiter is one Watch registration. Its attempt arms an etcd watch on
// what blocks it; a deletion there sends the wake-up.
type waiter struct {
	b     *Backend
	ch    chan struct{}
	mu    sync.Mutex
	cur   target
	stopW context.CancelFunc
	done  chan struct{}
}

// Watch registers owner's interest in key (driver.Notifier). The etcd watch
// itself is opened by the attempt that follows, once it knows what to
// watch: the queue entry just ahead of the waiter (fair locks, queued
// read/write holds and fair permits), or the key's holders (plain waiters).
func (b *Backend) Watch(ctx context.Context, key string, owner driver.Owner) (<-chan struct{}, func(), error) {
	if b.cfg.err != nil {
		return nil, nil, b.cfg.err
	}
	w := &waiter{b: b, ch: make(chan struct{}, 1)}
	k := waitKey{key, owner}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, nil, driver.Unavailable("watch", driver.ErrClosed)
	}
	b.waiters[k] = w
	b.mu.Unlock()
	var once sync.Once
	cancel := func() {
		once.Do(func() {
			b.mu.Lock()
			if b.waiters[k] == w {
				delete(b.waiters, k)
			}
			b.mu.Unlock()
			w.stop()
			b.withdrawLater(k)
		})
	}
	return w.ch, cancel, nil
}

// cancelGrace is how long a lock's queue entry outlives the end of its
// waiter's wait. The Client withdraws fair waiters itself (Release); a
// plain waiter whose context ended just stops, and its entry would hold
// up the queue until its queue TTL. A waiter that goes on waiting
// registers again at once, well within the grace.
const cancelGrace = 250 * time.Millisecond

// withdrawLater withdraws k's lock queue entry if k neither waits nor
// tries again within cancelGrace.
func (b *Backend) withdrawLater(k waitKey) {
	r := lockRef(k.key, k.owner)
	if b.getQueued(r) == nil {
		return
	}
	time.AfterFunc(cancelGrace, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		q := b.queued[r]
		if b.closed || q == nil || b.waiters[k] != nil || time.Since(q.touched) < cancelGrace {
			return
		}
		delete(b.queued, r)
		q.timer.Stop()
		rev, l := q.rev, q.lease
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			ctx, cancel := context.WithTimeout(b.ctx, b.cfg.opTimeout)
			defer cancel()
			_, _ = b.deleteEntry(ctx, b.qkey(r), rev, l)
		}()
	})
}

// waiting reports whether owner has a Watch registration for key: its
// attempts are contended ones, which read before they write.
func (b *Backend) waiting(key string, owner driver.Owner) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiters[waitKey{key, owner}] != nil
}

// arm points owner's registration for key at t.
func (b *Backend) arm(key string, owner driver.Owner, t target) {
	b.mu.Lock()
	w := b.waiters[waitKey{key, owner}]
	closed := b.closed
	b.mu.Unlock()
	if w == nil || closed {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done != nil {
		if w.cur.key == t.key && w.cur.prefix == t.prefix {
			select {
			case <-w.done: // ended (an error woke the waiter): watch anew
			default:
				return // already watching it, from an earlier revision
			}
		}
		w.stopW()
		<-w.done
	}
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(b.ctx))
	opts := []clientv3.OpOption{clientv3.WithRev(t.from), clientv3.WithFilterPut()}
	if t.prefix {
		opts = append(opts, clientv3.WithPrefix())
	}
	wch := b.cli.Watch(ctx, t.key, opts...)
	done := make(chan struct{})
	w.cur, w.stopW, w.done = t, cancel, done
	go func() {
		defer close(done)
		for resp := range wch {
			if resp.Err() != nil || resp.Canceled {
				w.wake() // compacted, no leader, closing: let the attempt look
				cancel()
				for range wch { // drain until the client closes the channel
				}
				return
			}
			for _, ev := range resp.Events {
				if ev.Type == mvccpb.DELETE {
					w.wake()
					break
				}
			}
		}
	}()
}

func (w *waiter) wake() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// stop ends the registration's etcd watch, if any, and waits for it.
func (w *waiter) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done != nil {
		w.stopW()
		<-w.done
		w.done = nil
	}
}

// NotifyLoss calls fn when owner's lock on key is lost (driver.LossNotifier):
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
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			fn()
		}()
		return func() {}
	}
	ctx, cancel := context.WithCancel(b.ctx)
	hkey := h.key
	timer := time.AfterFunc(b.cfg.lossDelay, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.closed || ctx.Err() != nil {
			return
		}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			if b.watchLoss(ctx, hkey, h.rev) {
				fn()
			}
		}()
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
