package redislock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/redis/go-redis/v9"
)

var _ driver.Inspector = (*Quorum)(nil)

// Lock implements driver.Inspector: the owner that a majority of the nodes
// name as holder of key. Its token is the largest of theirs (the token the
// grant reported), its TTL the Majority-th longest remaining lease (the
// time a majority still holds it, as TTL reports) and Waiters what a
// majority of nodes count at least. ErrNotHeld when no owner can hold a
// majority whatever the nodes that did not answer would say; an error
// matching ErrUnavailable when too few answered to tell.
//
// A grant reaches the nodes one after another, so a read during one can
// see the owner on a majority before its last nodes: the largest token
// would still grow. While some node that does not name the owner may still
// grant it (mayGrant, or it did not answer the read in time), Lock reads
// again, for at most twice the node timeout (a granted fair waiter leaves
// the other queues before its Acquire returns).
func (q *Quorum) Lock(ctx context.Context, key string) (driver.LockInfo, error) {
	if err := q.check(ctx); err != nil {
		return driver.LockInfo{}, err
	}
	settle := time.NewTimer(2 * q.cfg.nodeTimeout)
	defer settle.Stop()
	for {
		li, growing, err := q.readLock(ctx, key)
		if err != nil || !growing {
			return li, err
		}
		select {
		case <-settle.C:
			return li, nil
		case <-ctx.Done():
			return driver.LockInfo{}, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// readLock is one read of Lock; growing says whether the holder may still
// be granted more nodes.
func (q *Quorum) readLock(ctx context.Context, key string) (driver.LockInfo, bool, error) {
	per := make([]driver.LockInfo, len(q.nodes))
	ans := q.fanout(ctx, q.cfg.nodeTimeout,
		func(ctx context.Context, i int, nd *quorumNode) nodeAnswer {
			li, err := nd.b.Lock(ctx, key)
			if errors.Is(err, driver.ErrNotHeld) {
				return nodeAnswer{}
			}
			if err == nil {
				per[i] = li // each node goroutine writes only its own slot
			}
			return nodeAnswer{err: err}
		}, nil, nil)
	if err := ctx.Err(); err != nil {
		return driver.LockInfo{}, false, err
	}
	var seen []driver.LockInfo
	unknown := 0
	for i, a := range ans {
		switch {
		case !a.ok || a.err != nil:
			unknown++
		case per[i].Owner != "":
			seen = append(seen, per[i])
		}
	}
	if li, ok := q.agree(seen); ok {
		var others []int
		for i, a := range ans {
			switch {
			case !a.ok || a.err != nil && !notSent(a.err):
				// No answer in time: the node may be granting the owner
				// right now, with a larger token than the majority shows.
				return li, true, nil
			case a.err == nil && per[i].Owner != li.Owner:
				others = append(others, i)
			}
		}
		return li, q.mayGrant(ctx, key, li.Owner, others, per), nil
	}
	if best := mostNamed(seen); best+unknown < q.quorum && unknown < q.quorum {
		return driver.LockInfo{}, false, driver.ErrNotHeld
	}
	return driver.LockInfo{}, false, driver.Unavailable("quorum lock", fmt.Errorf("%d of %d nodes answered, no owner named by %d (%v)", len(ans)-unknown, len(ans), q.quorum, firstErr(ans)))
}

// mayGrant reports whether any of the nodes idx (which did not name owner
// as holder) may still grant it: it does now, owner is in its fair queue,
// or it is free with no queue (an attempt of owner may be on its way). A
// free node whose queue has others will go to them.
func (q *Quorum) mayGrant(ctx context.Context, key string, owner driver.Owner, idx []int, per []driver.LockInfo) bool {
	var may atomic.Bool
	var wg sync.WaitGroup
	for _, i := range idx {
		nd, free := q.nodes[i], per[i].Owner == ""
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, q.cfg.nodeTimeout)
			defer cancel()
			c := nd.b.newCall(key, owner)
			qk, _, _ := queueKeys(c.lk)
			// One transaction: a handoff takes owner off the queue and
			// writes the lock for it at once, so one of the two shows.
			var get *redis.StringCmd
			var score *redis.FloatCmd
			var size *redis.IntCmd
			_, _ = nd.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
				get, score, size = p.Get(ctx, c.lk), p.ZScore(ctx, qk, c.owner), p.ZCard(ctx, qk)
				return nil
			})
			v := get.Val()
			if len(v) > 8 && v[:len(v)-8] == c.owner || score.Err() == nil || free && size.Err() == nil && size.Val() == 0 {
				may.Store(true)
			}
		})
	}
	wg.Wait()
	return may.Load()
}

// Locks implements driver.Inspector: it lists every node's locks under
// prefix (all nodes at once) and reports each lock whose owner a majority
// names, as Lock describes it, in key order. It fails unless a majority of
// the nodes could be listed.
func (q *Quorum) Locks(ctx context.Context, prefix string, fn func(driver.LockInfo) bool) error {
	if err := q.check(ctx); err != nil {
		return err
	}
	byKey := make(map[string][]driver.LockInfo)
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, len(q.nodes))
	for i, nd := range q.nodes {
		wg.Go(func() {
			var mine []driver.LockInfo
			errs[i] = nd.b.Locks(ctx, prefix, func(li driver.LockInfo) bool {
				mine = append(mine, li)
				return true
			})
			if errs[i] != nil {
				return
			}
			mu.Lock()
			for _, li := range mine {
				byKey[li.Key] = append(byKey[li.Key], li)
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	failed := 0
	var first error
	for _, err := range errs {
		if err != nil {
			failed++
			first = cmp.Or(first, err)
		}
	}
	if len(q.nodes)-failed < q.quorum {
		if err := ctx.Err(); err != nil {
			return err
		}
		return driver.Unavailable("quorum locks", fmt.Errorf("%d of %d nodes listed, %d needed (%w)", len(q.nodes)-failed, len(q.nodes), q.quorum, first))
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if li, ok := q.agree(byKey[k]); ok && !fn(li) {
			return nil
		}
	}
	return nil
}

// agree returns the lock a majority of nodes describe among infos (one
// node's view each, all of one key), merged as Lock documents.
func (q *Quorum) agree(infos []driver.LockInfo) (driver.LockInfo, bool) {
	slices.SortFunc(infos, func(a, b driver.LockInfo) int { return strings.Compare(string(a.Owner), string(b.Owner)) })
	for i := 0; i < len(infos); {
		j := i
		for j < len(infos) && infos[j].Owner == infos[i].Owner {
			j++
		}
		if same := infos[i:j]; len(same) >= q.quorum {
			li := same[0]
			ttls := make([]time.Duration, len(same))
			waiters := make([]int, len(same))
			for k, x := range same {
				li.Token = max(li.Token, x.Token)
				ttls[k], waiters[k] = x.TTL, x.Waiters
			}
			slices.Sort(ttls)
			slices.Sort(waiters)
			li.TTL = ttls[len(ttls)-q.quorum]
			li.Waiters = waiters[len(waiters)-q.quorum]
			li.Age = 0
			return li, true
		}
		i = j
	}
	return driver.LockInfo{}, false
}

// mostNamed returns how many of infos name their most named owner.
func mostNamed(infos []driver.LockInfo) int {
	n := make(map[driver.Owner]int, len(infos))
	best := 0
	for _, li := range infos {
		n[li.Owner]++
		best = max(best, n[li.Owner])
	}
	return best
}
