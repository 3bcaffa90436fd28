package redislock

import (
	"context"
	"sync"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
)

// Keeping a fair waiter's place across a failed quorum attempt.
//
// A release reaches the nodes one after another, and each node hands the
// lock to the head of its own fair queue as soon as its release arrives
// (wake in queue.lua). The waiter first in line is woken by the first node
// and tries again while the other nodes are still held: a majority refuses
// and the attempt fails. Giving its grants back with an ordinary release
// would hand each of them on to the next in that node's queue, and the
// waiter, no longer queued there, would have lost its place: after two such
// losses the waiter behind it is first on a majority and wins, out of
// arrival order. So a failed fair waiting attempt that is first in line on
// a majority of nodes (granted there, or at the head of the queue behind a
// holder) yields its grants instead (yield.lua): each is freed without
// being handed on and the waiter is put back at the head of that node's
// queue, with a fresh queue deadline.
//
// Yielding never blocks a waiter that is first on a majority, and at most
// one waiter can be (two majorities share a node, and a node has one first
// in line). A waiter first on fewer nodes releases as before, so waiters
// whose arrivals interleaved differently per node still reorder and make
// progress. Only while grants are held for a moment can two waiters each
// count a node where one holds and the other heads the queue; a waiter
// yields for at most one queue TTL in a row (yieldLimit) so that such a
// cycle cannot hold the key up for longer than a crashed queue head would.

var (
	yieldScript  = loadScript("token.lua", "queue.lua", "yield.lua")
	settleScript = loadScript("token.lua", "queue.lua", "settle.lua")
)

// yieldLimit is how long a waiter may keep yielding in a row: its queue
// TTL, the time a crashed head may hold a queue up.
func (q *Quorum) yieldLimit(req driver.Request) time.Duration {
	if req.QueueTTL > 0 {
		return req.QueueTTL
	}
	return q.nodes[0].b.cfg.queueTTL
}

// yields records, per key and owner, when the waiter's current run of
// yields must end.
type yields struct {
	mu    sync.Mutex
	until map[lateKey]time.Time
}

// allow reports whether owner may yield key now, starting a run of at most
// limit if none is under way.
func (y *yields) allow(k lateKey, limit time.Duration) bool {
	now := time.Now()
	y.mu.Lock()
	defer y.mu.Unlock()
	if y.until == nil {
		y.until = make(map[lateKey]time.Time)
	}
	until, ok := y.until[k]
	if !ok {
		y.until[k] = now.Add(limit)
		return true
	}
	return now.Before(until)
}

// end ends owner's run of yields on key: on a grant, a release or an
// attempt that did not yield (the next attempt may start a new run, after
// this one let the queues reorder). Runs past their end, of waiters that
// vanished, are dropped with it.
func (y *yields) end(k lateKey) {
	now := time.Now()
	y.mu.Lock()
	defer y.mu.Unlock()
	delete(y.until, k)
	for o, until := range y.until {
		if now.After(until) {
			delete(y.until, o)
		}
	}
}

// keepPlace decides whether a failed fair waiting attempt with some grants
// yields them (true) or releases them. ans are the attempt's answers; it
// asks the nodes that refused for owner's place in their queue.
func (q *Quorum) keepPlace(req driver.Request, ans []nodeAnswer) bool {
	k, limit := lateKey{req.Key, req.Owner}, q.yieldLimit(req)
	first, held := 0, 0
	var refused []int
	for i, a := range ans {
		switch {
		case a.ok && a.err == nil && a.res.Acquired:
			first++
			held++
		case a.ok && a.err == nil:
			refused = append(refused, i)
		}
	}
	if held > 0 && first+len(refused) >= q.quorum {
		first += q.headsAmong(req, refused)
	}
	if held == 0 || first < q.quorum || !q.yields.allow(k, limit) {
		q.yields.end(k)
		return false
	}
	return true
}

// headsAmong counts the nodes among idx where owner heads the fair queue.
func (q *Quorum) headsAmong(req driver.Request, idx []int) int {
	var mu sync.Mutex
	var wg sync.WaitGroup
	n := 0
	for _, i := range idx {
		nd := q.nodes[i]
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), q.cfg.nodeTimeout)
			defer cancel()
			c := nd.b.newCall(req.Key, req.Owner)
			qk, _, _ := queueKeys(c.lk)
			if r, err := nd.rdb.ZRank(ctx, qk, c.owner).Result(); err == nil && r == 0 {
				mu.Lock()
				n++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return n
}

// yieldNode gives owner's grant of key on one node back, keeping owner at
// the head of the node's fair queue (yield.lua), bounded like releaseNode.
func (q *Quorum) yieldNode(nd *quorumNode, req driver.Request) {
	ctx, cancel := context.WithTimeout(context.Background(), max(q.cfg.nodeTimeout, time.Second))
	defer cancel()
	b := nd.b
	qttl := req.QueueTTL
	if qttl <= 0 {
		qttl = b.cfg.queueTTL
	}
	c := b.newCall(req.Key, req.Owner)
	c.ms, c.qttl = millis(req.Lease), millis(qttl)
	c.args[2], c.args[4], c.args[5], c.args[6], c.args[7], c.args[8] = "1", &c.owner, &c.ms, &c.qttl, b.idArg, b.tombArg
	_, _ = b.eval(ctx, yieldScript, c, 9)
}

// settleQueues is the end of a fair waiter's successful attempt on the
// nodes that refused it (settle.lua): a node that a release has handed the
// lock to since is kept and its token raises tok; on the others the waiter
// leaves the fair queue before its Acquire returns. Queued there, it would
// be handed those nodes later, each with a larger token, and the lock
// would seem to change term (Lock reports the largest token). It returns
// the grant's token.
func (q *Quorum) settleQueues(req driver.Request, ans []nodeAnswer, tok driver.Token) driver.Token {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, a := range ans {
		if !a.ok || a.err != nil || a.res.Acquired {
			continue
		}
		b := q.nodes[i].b
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), max(q.cfg.nodeTimeout, time.Second))
			defer cancel()
			c := b.newCall(req.Key, req.Owner)
			c.ms = millis(req.Lease)
			c.args[2], c.args[4], c.args[5], c.args[6] = "1", &c.owner, &c.ms, b.chpfArg
			if t, err := b.eval(ctx, settleScript, c, 7); err == nil && t > 0 {
				mu.Lock()
				tok = max(tok, driver.Token(t))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return tok
}
