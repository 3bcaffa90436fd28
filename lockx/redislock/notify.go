package redislock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/redis/go-redis/v9"
)

// Wake-up without polling. Each Backend subscribes once, lazily at the first
// Watch, to its own channel "<prefix>w:<backend id>". A refused attempt that
// will wait records the backend id with the key (a "w:<id>" field of the lock
// hash, or the fair-queue entry), and the release script publishes
// "<len(owner)>:<owner><lock key>" to each recorded channel — to the queue
// head's backend only, naming the head, when a fair queue is waiting. One
// dispatcher goroutine per Backend routes messages to the watchers of the
// key. Cost falls only on contended keys: an uncontended release finds no
// marks and publishes nothing.

const (
	// confirmWait bounds how long Watch waits for the subscription to be
	// confirmed, counted from its start, when ctx allows longer: a
	// subscription that cannot be made (server down, SUBSCRIBE denied) delays
	// the first waits only. Returning unconfirmed is safe: every confirmation
	// (the first and each one after a reconnect) wakes all watchers, so a
	// release published before the subscription took effect is followed by
	// a wake-up anyway.
	confirmWait = time.Second
	// healthInterval: after this long without traffic the dispatcher pings;
	// after twice this long without an answer it replaces the connection.
	healthInterval = 5 * time.Second
)

var errClosed = fmt.Errorf("redislock: backend closed: %w", driver.ErrClosed)

type notifier struct {
	b      *Backend
	health time.Duration   // healthInterval; tests shorten it
	ctx    context.Context // cancelled by close: ends dials and reads
	cancel context.CancelFunc
	done   chan struct{} // closed by close
	wg     sync.WaitGroup

	mu       sync.Mutex
	started  bool
	closed   bool
	ps       *redis.PubSub
	ready    chan struct{}        // closed at the first confirmed subscription
	readyBy  time.Time            // Watch waits for ready until then at most
	watchers map[string]*watchSet // by lock key
	seq      uint64               // last watcher's seq
	waits    map[waitKey]*waitRec // fair waiters' refusals and handoffs (handoff.go)
	swept    time.Time            // last sweep of waits
}

type watchSet struct{ m map[*watcher]struct{} }

type watcher struct {
	seq   uint64 // registration order
	owner driver.Owner
	enc   string        // owner encoded as the lock scripts store it
	ch    chan struct{} // capacity 1: a pending wake-up
}

func (n *notifier) init(b *Backend) {
	n.b = b
	n.health = healthInterval
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.done = make(chan struct{})
	n.ready = make(chan struct{})
	n.watchers = make(map[string]*watchSet)
}

// channel is this backend's wake-up channel.
func (b *Backend) channel() string { return b.chpf + b.id }

// Watch implements driver.Notifier. The first call starts the subscription
// and waits (bounded by ctx) until Redis has confirmed it.
func (b *Backend) Watch(ctx context.Context, key string, owner driver.Owner) (<-chan struct{}, func(), error) {
	if b.err != nil {
		return nil, nil, b.err
	}
	n := &b.n
	lk := b.lockKey(key)
	w := &watcher{owner: owner, enc: encodeOwner(owner), ch: make(chan struct{}, 1)}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, nil, errClosed
	}
	if !n.started {
		n.started = true
		n.readyBy = time.Now().Add(confirmWait)
		n.wg.Add(1)
		go n.loop()
	}
	set := n.watchers[lk]
	if set == nil {
		set = &watchSet{m: make(map[*watcher]struct{})}
		n.watchers[lk] = set
	}
	n.seq++
	w.seq = n.seq
	set.m[w] = struct{}{}
	ready, readyBy := n.ready, n.readyBy
	n.mu.Unlock()

	cancel := func() {
		n.mu.Lock()
		delete(set.m, w)
		if len(set.m) == 0 && n.watchers[lk] == set {
			delete(n.watchers, lk)
		}
		n.mu.Unlock()
	}
	select {
	case <-ready:
		return w.ch, cancel, nil
	default:
	}
	wait := time.Until(readyBy)
	if wait <= 0 {
		return w.ch, cancel, nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ready:
	case <-t.C:
	case <-n.done:
	case <-ctx.Done():
		cancel()
		return nil, nil, ctx.Err()
	}
	return w.ch, cancel, nil
}

// loop is the dispatcher: it owns the subscription, reads it, routes
// messages and keeps the connection healthy. It ends when close is called.
func (n *notifier) loop() {
	defer n.wg.Done()
	ps := n.open()
	if ps == nil {
		return
	}
	delay, pinged := 50*time.Millisecond, false
	for {
		msg, err := ps.ReceiveTimeout(n.ctx, n.health)
		if n.ctx.Err() != nil {
			return
		}
		if err != nil {
			switch {
			case isTimeout(err) && !pinged:
				pinged = true
				_ = ps.Ping(n.ctx)
			case isTimeout(err):
				// A silent connection that does not answer a ping: replace it.
				_ = ps.Close()
				if ps = n.open(); ps == nil {
					return
				}
				pinged = false
			default:
				// Connection lost: the next Receive reconnects and
				// resubscribes; its confirmation wakes every watcher.
				pinged = false
				if !n.sleep(delay) {
					return
				}
				delay = min(2*delay, time.Second)
			}
			continue
		}
		delay, pinged = 50*time.Millisecond, false
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				n.subscribed()
			}
		case *redis.Message:
			if lk := n.dispatch(m.Payload); lk != "" {
				n.passOn(lk)
			}
		}
	}
}

// open starts a new PubSub on the backend's channel, or returns nil after
// close. A failed first subscribe is retried by the next Receive.
func (n *notifier) open() *redis.PubSub {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	ps := n.b.rdb.Subscribe(n.ctx) // no channels yet: no I/O under the lock
	n.ps = ps
	n.mu.Unlock()
	_ = ps.Subscribe(n.ctx, n.b.channel())
	return ps
}

func (n *notifier) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-n.done:
		return false
	}
}

// subscribed handles a subscription confirmation: the first one releases
// Watch callers, and every one wakes all watchers, because messages published
// while the connection was down are lost.
func (n *notifier) subscribed() {
	n.mu.Lock()
	defer n.mu.Unlock()
	select {
	case <-n.ready:
	default:
		close(n.ready)
	}
	n.wakeAll()
}

// wakeAll wakes every watcher. Callers hold n.mu.
func (n *notifier) wakeAll() {
	for _, set := range n.watchers {
		for w := range set.m {
			w.wake()
		}
	}
}

// dispatch routes one published payload "<len(owner)>:<owner><lock key>".
// A named owner wakes that owner's watchers (a fair queue head, or the
// pattern scripts' targeted wake-ups). An empty owner is a plain release that
// woke this backend alone: it wakes one watcher of the key, so that one free
// lock does not send every waiter to the server. If no watcher of the key is
// left, dispatch returns the lock key so that the wake-up is passed on to
// another waiting backend. The lock scripts name owners encoded, the pattern
// scripts (rw, semaphore) as they are; either matches. (A false match would
// only cost a retry.)
func (n *notifier) dispatch(p string) (passOn string) {
	var tok driver.Token
	var lease time.Duration
	if strings.HasPrefix(p, "=") {
		// A fair handoff: the lock is the named owner's already.
		var ok bool
		if tok, lease, p, ok = parseHandoff(p); !ok {
			return ""
		}
	}
	i := strings.IndexByte(p, ':')
	if i <= 0 {
		return ""
	}
	ln, err := strconv.Atoi(p[:i])
	if err != nil || ln < 0 || ln > len(p)-i-1 {
		return ""
	}
	owner := p[i+1 : i+1+ln]
	lk := p[i+1+ln:]
	n.mu.Lock()
	defer n.mu.Unlock()
	if tok > 0 && owner != "" {
		n.handedOff(lk, owner, tok, lease)
	}
	set := n.watchers[lk]
	if owner == "" {
		if set == nil || len(set.m) == 0 {
			return lk
		}
		// The longest-waiting watcher goes first (plain waiters are not
		// promised an order, but this keeps them from starving one another).
		var oldest *watcher
		for w := range set.m {
			if oldest == nil || w.seq < oldest.seq {
				oldest = w
			}
		}
		oldest.wake()
		return ""
	}
	if set == nil {
		return ""
	}
	for w := range set.m {
		if string(w.owner) == owner || w.enc == owner {
			w.wake()
		}
	}
	return ""
}

// othersWaiting reports whether a watcher of lk other than owner's is
// registered, so that a grant keeps this backend's waiter mark.
func (n *notifier) othersWaiting(lk string, owner driver.Owner) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	set := n.watchers[lk]
	if set == nil {
		return false
	}
	for w := range set.m {
		if w.owner != owner {
			return true
		}
	}
	return false
}

// passOn hands a plain wake-up that found no watcher here to the next
// waiting backend, if the key is still free. It runs on the dispatcher
// goroutine and is rare: a waiter gave up between its mark and the release.
func (n *notifier) passOn(lk string) {
	b := n.b
	q, d, w := queueKeys(lk)
	c := &call{lk: lk}
	c.args[2], c.args[3], c.args[4], c.args[5], c.args[6] = "4", lk, q, d, w
	c.args[7] = b.chpfArg
	ctx, cancel := context.WithTimeout(n.ctx, time.Second)
	defer cancel()
	_, _ = b.eval(ctx, wakeScript, c, 8)
}

func (w *watcher) wake() {
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// close ends the dispatcher and the subscription, and wakes all watchers so
// that none sleeps on a wake-up that can no longer come.
func (n *notifier) close() {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	n.closed = true
	n.waits = nil
	close(n.done)
	n.cancel()
	ps := n.ps
	n.wakeAll()
	n.mu.Unlock()
	if ps != nil {
		_ = ps.Close()
	}
	n.wg.Wait()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
