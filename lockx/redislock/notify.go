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

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/internal/backendkit"
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
	health time.Duration    // healthInterval; tests shorten it
	g      backendkit.Group // the dispatcher; its context ends dials and reads at close

	mu       sync.Mutex
	started  bool // closed: n.g.Closed(), set under mu by close (Group.Shut)
	ps       *redis.PubSub
	ready    chan struct{}                       // closed at the first confirmed subscription
	readyBy  time.Time                           // Watch waits for ready until then at most
	watchers backendkit.Registry[string, string] // by lock key; X: the owner encoded as the lock scripts store it
	waits    map[waitKey]*waitRec                // fair waiters' refusals and handoffs (handoff.go)
	swept    time.Time                           // last sweep of waits
	// up: the subscription is confirmed and no loss of its connection has
	// been seen since. epoch counts confirmations and losses, so that a
	// waiter can tell whether one came between its attempt and its Watch
	// (waitRec.epoch); 0 before the first confirmation.
	up    bool
	epoch uint64
}

func (n *notifier) init(b *Backend) {
	n.b = b
	n.health = healthInterval
	n.ready = make(chan struct{})
}

// channel is this backend's wake-up channel.
func (b *Backend) channel() string { return b.chpf + b.id }

// Watch implements lockx.Notifier. The first call starts the subscription
// and waits (bounded by ctx) until Redis has confirmed it.
func (b *Backend) Watch(ctx context.Context, key string, owner driver.Owner) (<-chan struct{}, func(), error) {
	if b.err != nil {
		return nil, nil, b.err
	}
	n := &b.n
	lk := b.lockKey(key)
	n.mu.Lock()
	if n.g.Closed() {
		n.mu.Unlock()
		return nil, nil, errClosed
	}
	if !n.started {
		n.started = true
		n.readyBy = time.Now().Add(confirmWait)
		n.g.Go(n.loop)
	}
	w := n.watchers.Add(lk, owner)
	w.X = encodeOwner(owner)
	n.caughtUp(lk, w)
	ready, readyBy := n.ready, n.readyBy
	n.mu.Unlock()

	cancel := func() {
		n.mu.Lock()
		n.watchers.Remove(lk, w)
		n.mu.Unlock()
	}
	select {
	case <-ready:
		return w.C(), cancel, nil
	default:
	}
	wait := time.Until(readyBy)
	if wait <= 0 {
		return w.C(), cancel, nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ready:
	case <-t.C:
	case <-n.g.Done():
	case <-ctx.Done():
		cancel()
		return nil, nil, ctx.Err()
	}
	return w.C(), cancel, nil
}

// caughtUp wakes w, just registered for lk, at once if its waiter may have
// missed a message between its refused attempt and this registration: one
// came before the refusal was recorded (a handoff or a wake), or the
// subscription was lost or renewed since the attempt was sent. Callers hold
// n.mu.
func (n *notifier) caughtUp(lk string, w *backendkit.Watcher[string]) {
	r := n.waits[waitKey{lk, w.X}]
	if r == nil {
		return
	}
	if (r.tok > 0 && !r.early) || r.wake || (r.epoch != 0 && r.epoch != n.epoch) {
		r.wake = false
		w.Wake()
	}
}

// queued returns the subscription's epoch if it is up, else 0: an attempt
// sent in a non-zero epoch may promise its waiter's wake-ups to a later
// Watch (driver.Result.Queued).
func (n *notifier) queued() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.up {
		return 0
	}
	return n.epoch
}

// lost records that the subscription's connection failed or is being
// replaced: messages may be lost until the next confirmation.
func (n *notifier) lost() {
	n.mu.Lock()
	if n.up {
		n.up = false
		n.epoch++
	}
	n.mu.Unlock()
}

// loop is the dispatcher: it owns the subscription, reads it, routes
// messages and keeps the connection healthy. It ends when close is called.
func (n *notifier) loop() {
	ctx := n.g.Context()
	ps := n.open()
	if ps == nil {
		return
	}
	delay, pinged := 50*time.Millisecond, false
	for {
		msg, err := ps.ReceiveTimeout(ctx, n.health)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			switch {
			case isTimeout(err) && !pinged:
				pinged = true
				_ = ps.Ping(ctx)
			case isTimeout(err):
				// A silent connection that does not answer a ping: replace it.
				n.lost()
				_ = ps.Close()
				if ps = n.open(); ps == nil {
					return
				}
				pinged = false
			default:
				// Connection lost: the next Receive reconnects and
				// resubscribes; its confirmation wakes every watcher.
				n.lost()
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
	if n.g.Closed() {
		n.mu.Unlock()
		return nil
	}
	ctx := n.g.Context()
	ps := n.b.rdb.Subscribe(ctx) // no channels yet: no I/O under the lock
	n.ps = ps
	n.mu.Unlock()
	_ = ps.Subscribe(ctx, n.b.channel())
	return ps
}

func (n *notifier) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-n.g.Done():
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
	n.up = true
	n.epoch++
	n.wakeAll()
}

// wakeAll wakes every watcher. Callers hold n.mu.
func (n *notifier) wakeAll() { n.watchers.WakeEvery() }

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
	permits := strings.HasPrefix(p, "+")
	if permits || strings.HasPrefix(p, "=") {
		// A direct handoff: the lock ('=') or the semaphore's permits ('+')
		// are the named owner's already.
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
	if owner != "" {
		rec := lk
		if permits {
			rec = permitRecord(lk)
		}
		n.named(rec, owner, tok, lease)
	}
	if owner == "" {
		// The longest-waiting watcher goes first (plain waiters are not
		// promised an order, but this keeps them from starving one another).
		if !n.watchers.WakeFirst(lk, false) {
			return lk
		}
		return ""
	}
	n.watchers.WakeIf(lk, func(w *backendkit.Watcher[string]) bool {
		return string(w.Owner) == owner || w.X == owner
	})
	return ""
}

// othersWaiting reports whether a watcher of lk other than owner's is
// registered, so that a grant keeps this backend's waiter mark.
func (n *notifier) othersWaiting(lk string, owner driver.Owner) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	others := false
	n.watchers.Each(lk, func(w *backendkit.Watcher[string]) bool {
		others = w.Owner != owner
		return !others
	})
	return others
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
	ctx, cancel := context.WithTimeout(n.g.Context(), time.Second)
	defer cancel()
	_, _ = b.eval(ctx, wakeScript, c, 8)
}

// close ends the dispatcher and the subscription, and wakes all watchers so
// that none sleeps on a wake-up that can no longer come.
func (n *notifier) close() {
	var ps *redis.PubSub
	if !n.g.Shut(&n.mu, func() {
		n.waits = nil
		n.g.Cancel()
		ps = n.ps
		n.wakeAll()
	}) {
		return
	}
	if ps != nil {
		_ = ps.Close()
	}
	n.g.Wait()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}
