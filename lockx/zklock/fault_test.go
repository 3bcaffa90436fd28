package zklock_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/zklock"
)

// cutter is a zk.Dialer whose connections a test can cut: Cut closes them
// and refuses new dials until Mend, so the server sees the client vanish
// and expires its session after the session timeout.
type cutter struct {
	mu    sync.Mutex
	cut   bool
	conns []net.Conn
}

func (c *cutter) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return nil, errors.New("cutter: network cut")
	}
	conn, err := net.DialTimeout(network, addr, timeout)
	if err == nil {
		c.conns = append(c.conns, conn)
	}
	return conn, err
}

func (c *cutter) Cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = true
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.conns = nil
}

func (c *cutter) Mend() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cut = false
}

func within(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// TestSessionExpiry cuts a holder off the server. Its Backend declares the
// lock lost after a quarter of the session timeout; the server expires the
// session after the whole timeout, deleting the node, and only then does a
// waiter get the lock — with a greater token. The holder is told before the
// waiter is granted: that order is the safety property. When the network
// comes back the holder learns of the expiry, gets a new session and can
// lock again; a waiter whose session expired queues again and acquires.
func TestSessionExpiry(t *testing.T) {
	z := testenv.SharedZooKeeper(t)
	const timeout = 2 * time.Second // loss at 0.5 s, expiry ≥ 1.3 s: a margin for a loaded machine
	cut := &cutter{}
	holderB := dial(t, z.Addr, zklock.WithSessionTimeout(timeout), zklock.WithConnOptions(zk.WithDialer(cut.dial)))
	holder := lockx.New(holderB)
	defer holder.Close()
	waiter := lockx.New(dial(t, z.Addr))
	defer waiter.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := "expiry:" + t.Name()

	l, err := holder.Acquire(ctx, key) // watchdog lease 30 s: only the session can end it
	if err != nil {
		t.Fatal(err)
	}
	firstSession := holderB.SessionID()
	var lostAt time.Time
	lostDone := make(chan struct{})
	go func() {
		defer close(lostDone)
		select {
		case <-l.Lost():
			lostAt = time.Now()
		case <-ctx.Done():
		}
	}()
	got := make(chan *lockx.Lock, 1)
	var grantedAt time.Time
	go func() {
		l2, err := waiter.Acquire(ctx, key)
		grantedAt = time.Now()
		if err != nil {
			t.Error(err)
		}
		got <- l2
	}()
	time.Sleep(100 * time.Millisecond)
	cutAt := time.Now()
	cut.Cut()

	l2 := <-got
	<-lostDone
	if l2 == nil {
		return
	}
	if lostAt.IsZero() {
		t.Fatal("holder never told of the loss")
	}
	if !lostAt.Before(grantedAt) {
		t.Fatalf("holder told of the loss %v after the cut, the waiter granted %v after it: two holders at once",
			lostAt.Sub(cutAt), grantedAt.Sub(cutAt))
	}
	if !errors.Is(context.Cause(l.Context()), lockx.ErrLost) {
		t.Fatalf("holder's context cause = %v, want ErrLost", context.Cause(l.Context()))
	}
	if l2.Token() <= l.Token() {
		t.Fatalf("waiter's token %d not greater than the expired holder's %d", l2.Token(), l.Token())
	}
	t.Logf("cut → holder told lost after %v, waiter granted after %v (session timeout %v)",
		lostAt.Sub(cutAt).Round(time.Millisecond), grantedAt.Sub(cutAt).Round(time.Millisecond), holderB.SessionTimeout())

	// While the waiter holds, the cut-off client queues again; it must not
	// wait on its dead session's node. The network comes back after the
	// server expired that session.
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	again := make(chan error, 1)
	go func() {
		l3, err := holder.Acquire(wctx, key)
		if err == nil {
			if l3.Token() <= l2.Token() {
				err = errors.New("token did not increase after the expiry")
			}
			_ = l3.Release(context.Background())
		}
		again <- err
	}()
	time.Sleep(timeout + 500*time.Millisecond)
	cut.Mend()
	deadline := time.Now().Add(15 * time.Second)
	for holderB.SessionID() == firstSession || holderB.SessionID() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no new session after the network came back")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := l2.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-again; err != nil {
		t.Fatalf("re-acquire after expiry: %v", err)
	}
}

// TestServerRestart stops the server under a holder and a waiter for longer
// than the holder's Backend trusts a disconnection. The holder is told it
// lost the lock; when the server is back (sessions survive a restart) its
// node is deleted, the waiter acquires, and tokens issued after the restart
// are greater than every token before it (the zxid epoch moved on).
func TestServerRestart(t *testing.T) {
	t.Parallel() // its own server
	z := testenv.StartZooKeeper(t)
	const timeout = 4 * time.Second
	holder := lockx.New(dial(t, z.Addr, zklock.WithSessionTimeout(timeout)))
	defer holder.Close()
	waiterB := dial(t, z.Addr, zklock.WithSessionTimeout(timeout))
	waiter := lockx.New(waiterB)
	defer waiter.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	key := "restart:" + t.Name()

	l, err := holder.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *lockx.Lock, 1)
	go func() {
		l2, err := waiter.Acquire(ctx, key)
		if err != nil {
			t.Error(err)
		}
		got <- l2
	}()
	time.Sleep(200 * time.Millisecond)
	z.Stop()
	if !within(l.Lost(), 2*timeout) {
		t.Fatal("holder not told of the loss while the server was down")
	}
	select {
	case <-got:
		t.Fatal("waiter granted while the server was down")
	default:
	}
	z.Restart(t)
	var l2 *lockx.Lock
	select {
	case l2 = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("waiter not granted after the restart")
	}
	if l2 == nil {
		return
	}
	if l2.Token() <= l.Token() {
		t.Fatalf("token after restart %d not greater than %d", l2.Token(), l.Token())
	}
	if err := l.Release(context.Background()); !errors.Is(err, lockx.ErrLost) {
		t.Fatalf("release of the lost lock = %v, want ErrLost", err)
	}
	if _, err := l2.TTL(ctx); err != nil {
		t.Fatalf("the waiter's lock after the restart: %v", err)
	}
	if err := l2.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	l3, err := holder.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if l3.Token() <= l2.Token() {
		t.Fatalf("token %d not greater than %d", l3.Token(), l2.Token())
	}
	_ = l3.Release(context.Background())
}

// TestEnsembleLeaderFailover runs a holder and a waiter on a 3-server
// ensemble and SIGKILLs the leader. Every client is disconnected until a
// new leader serves (followers drop their clients while they have no
// leader), then reconnects with its session. The holder keeps its lock if
// that took less than a quarter of its session timeout, and is told it
// lost it otherwise — and the waiter is never granted while the holder
// still holds. Measured here: with a 4 s session (1 s of grace) the holder
// is told it lost the lock, with 10 s (2.5 s) it keeps it. Tokens issued
// after the failover carry the new leader's epoch (the top 32 bits of the
// zxid), so they exceed every earlier one.
func TestEnsembleLeaderFailover(t *testing.T) {
	t.Parallel() // its own servers
	ens := testenv.StartZooKeeperEnsemble(t, 3)
	for _, timeout := range []time.Duration{4 * time.Second, 10 * time.Second} {
		t.Run(timeout.String(), func(t *testing.T) { leaderFailover(t, ens, timeout) })
	}
}

func leaderFailover(t *testing.T, ens *testenv.ZooKeeperEnsemble, timeout time.Duration) {
	servers := strings.Join(ens.Addrs(), ",")
	holder := lockx.New(dial(t, servers, zklock.WithSessionTimeout(timeout)))
	defer holder.Close()
	waiter := lockx.New(dial(t, servers, zklock.WithSessionTimeout(timeout)))
	defer waiter.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	key := "failover:" + t.Name()

	l, err := holder.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	type grant struct {
		l  *lockx.Lock
		at time.Time
	}
	got := make(chan grant, 1)
	go func() {
		l2, err := waiter.Acquire(ctx, key)
		if err != nil {
			t.Error(err)
		}
		got <- grant{l2, time.Now()}
	}()
	time.Sleep(200 * time.Millisecond)
	leader := ens.Leader(t)
	killed := time.Now()
	leader.Kill()
	ens.Leader(t) // a new one is elected among the two left
	t.Logf("new leader serving %v after the kill", time.Since(killed).Round(time.Millisecond))

	var g grant
	select {
	case <-l.Lost():
		t.Logf("holder told it lost the lock %v after the kill", time.Since(killed).Round(time.Millisecond))
		g = <-got
	case g = <-got:
		t.Fatal("waiter granted while the holder still held the lock")
	case <-time.After(timeout / 2): // well past the quarter-timeout grace
		t.Log("holder kept its lock through the failover")
		if _, err := l.TTL(ctx); err != nil {
			t.Fatalf("the kept lock: %v", err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("release after the failover: %v", err)
		}
		g = <-got
	}
	if g.l == nil {
		return
	}
	if g.l.Token() <= l.Token() {
		t.Fatalf("token after the failover %d not above %d", g.l.Token(), l.Token())
	}
	if g.l.Token()>>32 <= l.Token()>>32 {
		t.Fatalf("token %x does not carry a newer epoch than %x", uint64(g.l.Token()), uint64(l.Token()))
	}
	_ = g.l.Release(ctx)
	leader.Restart(t) // back as a follower: the ensemble keeps working
	l3, err := holder.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if l3.Token() <= g.l.Token() {
		t.Fatalf("token %d not above %d", l3.Token(), g.l.Token())
	}
	_ = l3.Release(ctx)
}
