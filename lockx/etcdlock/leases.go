package etcdlock

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Every entry — a hold or a queue entry — is put on a lease of its own, so
// each lock has its own TTL and a dead process's entries vanish when their
// leases run out. Granting a lease is a write through raft, as costly as
// the put itself; so a Backend keeps the leases its released entries leave
// behind (they have no keys any more) and puts its next entries of the
// same TTL on them, renewing the lease with a keep-alive sent alongside
// the put. A keep-alive is answered by the leader without a raft round.

// lease is an etcd lease the backend uses for one entry at a time.
type lease struct {
	id  clientv3.LeaseID
	ttl int64 // seconds, as granted
	// until is when the lease ends at the earliest: TTL after its grant or
	// last keep-alive was sent.
	until time.Time
}

const (
	poolCap    = 64          // spare leases kept per TTL
	poolMargin = time.Second // a spare closer to its end is not used
)

// leaseTTL is the TTL of the leases for entries of lease d: d in whole
// seconds, rounded up, plus an eighth for leases of 8 s or more. The slack
// lets a spare lease serve a new entry without a keep-alive for a while
// after its last renewal; it only delays the freeing of a dead process's
// locks (a live holder's Backend frees a lapsed lock at its own deadline).
func leaseTTL(d time.Duration) int64 {
	if d >= 8*time.Second {
		d += d / 8
	}
	return secs(d)
}

// newLease grants a lease of at least d. The server may raise the TTL to
// its minimum; the lease records the TTL granted.
func (b *Backend) newLease(ctx context.Context, d time.Duration) (lease, error) {
	sent := time.Now()
	resp, err := b.cli.Grant(ctx, leaseTTL(d))
	if err != nil {
		return lease{}, err
	}
	return lease{id: resp.ID, ttl: resp.TTL, until: sent.Add(time.Duration(resp.TTL) * time.Second)}, nil
}

// spare takes a pooled lease of TTL ttl with time left, if there is one,
// the most recently renewed first.
func (b *Backend) spare(ttl int64) (lease, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return lease{}, false
	}
	pool := b.pool[ttl]
	for len(pool) > 0 {
		l := pool[len(pool)-1]
		pool = pool[:len(pool)-1]
		if time.Until(l.until) > poolMargin {
			b.pool[ttl] = pool
			return l, true
		}
		// Too close to its end: etcd will drop it on its own.
	}
	delete(b.pool, ttl)
	return lease{}, false
}

// giveBack returns a lease that carries no key any more to the pool.
func (b *Backend) giveBack(l lease) {
	if l.id == 0 {
		return
	}
	b.mu.Lock()
	if b.closed || len(b.pool[l.ttl]) >= poolCap || time.Until(l.until) <= poolMargin {
		b.mu.Unlock()
		b.revokeLater(l.id)
		return
	}
	for _, p := range b.pool[l.ttl] {
		if p.id == l.id { // given back twice (a release racing a renewal's move): one entry per lease
			b.mu.Unlock()
			return
		}
	}
	b.pool[l.ttl] = append(b.pool[l.ttl], l)
	b.mu.Unlock()
}

// leasedTxn commits the transaction build makes for a lease of at least d:
// a spare one, renewed by a keep-alive sent at the same time, or a new one.
// The returned lease is the one used (fresh until, if renewed); refreshErr
// is the keep-alive's failure other than "lease not found", after which the
// lease is good only until its old until.
func (b *Backend) leasedTxn(ctx context.Context, d time.Duration, build func(clientv3.LeaseID) clientv3.Txn) (resp *clientv3.TxnResponse, l lease, refreshErr error, err error) {
	ttl := leaseTTL(d)
	for range 3 {
		l, pooled := b.spare(ttl)
		if !pooled {
			if l, err = b.newLease(ctx, d); err != nil {
				return nil, lease{}, nil, err
			}
			resp, err = build(l.id).Commit()
			return resp, l, nil, err
		}
		if time.Until(l.until) >= d+poolMargin { // lives long enough as it is
			resp, err = build(l.id).Commit()
			if notFound(err) {
				continue
			}
			return resp, l, nil, err
		}
		sent := time.Now()
		kaDone := make(chan error, 1)
		go func() {
			_, err := b.cli.KeepAliveOnce(ctx, l.id)
			kaDone <- err
		}()
		resp, err = build(l.id).Commit()
		kaErr := <-kaDone
		if notFound(err) || notFound(kaErr) {
			if err == nil && resp.Succeeded {
				// Put on a lease that ran out just then: the entry went
				// with it. Report it as unknown; a retry starts afresh.
				return nil, lease{}, nil, errLeaseGone
			}
			continue // the spare ran out early: take another
		}
		if kaErr == nil {
			l.until = sent.Add(time.Duration(l.ttl) * time.Second)
		}
		return resp, l, kaErr, err
	}
	return nil, lease{}, nil, errLeaseGone
}
