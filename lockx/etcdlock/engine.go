package etcdlock

import (
	"context"
	"time"

	"github.com/lockx-go/lockx/lockx"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// policy is what differs between locks, read/write holds and permits: when
// an attempt may be granted, and how a refused one waits.
type policy struct {
	// fast lets an attempt with nothing queued try "grant if the directory
	// is empty" in one transaction before reading anything (plain locks).
	fast bool
	// queue says whether a refused waiting attempt writes a queue entry.
	queue bool
	// ordered says whether queued waiters are granted in queue order, so
	// each one only watches the entry just ahead of it.
	ordered bool
	// qvalue is the queue entry's value.
	qvalue string
	// decide says, from a view of the directory, whether the attempt may be
	// granted now and with what holder value; a non-nil error is a verdict
	// (lockx.ErrUpgrade).
	decide func(v *view, q *queued) (ok bool, value string, err error)
	// value is the holder value of a fast grant.
	value string
}

// maxConflicts bounds the optimistic retries of one attempt whose grant
// transaction lost a race with another writer of the directory.
const maxConflicts = 4

// attempt makes one acquisition attempt for r. It is idempotent per entry:
// a holder's repeat renews the lease and returns the same token.
func (b *Backend) attempt(ctx context.Context, r ref, req lockx.Request, p policy) (lockx.Result, error) {
	if b.cfg.err != nil {
		return lockx.Result{}, b.cfg.err
	}
	start := time.Now()
	if h := b.getHeld(r); h != nil {
		err := b.renew(ctx, r, h, req.Lease, start)
		if err == nil {
			return b.granted(h.rev, req.Lease)
		}
		if err != lockx.ErrNotHeld {
			return lockx.Result{}, err
		}
	}
	dir := b.dir(r.kind, r.key)
	hkey, qkey := dir+"h/"+r.name, dir+"q/"+r.name
	q := b.getQueued(r)
	if q != nil {
		if _, err := b.cli.KeepAliveOnce(ctx, q.lease); notFound(err) {
			b.dropQueued(r, q) // the entry ran out: queue again at the end
			q = nil
		} else if err != nil {
			return lockx.Result{}, unavailable("acquire", err)
		} else {
			b.refreshed(q)
		}
	}
	var lease clientv3.LeaseID
	var ttl int64
	defer func() { b.revokeLater(lease) }() // unless a grant took it (set to 0)
	var v view
	if p.fast && q == nil && !b.waiting(req.Key, req.Owner) {
		var err error
		if lease, ttl, err = b.grant(ctx, req.Lease); err != nil {
			return lockx.Result{}, unavailable("acquire", err)
		}
		resp, err := b.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(dir), "=", 0).WithPrefix()).
			Then(clientv3.OpPut(hkey, p.value, clientv3.WithLease(lease))).
			Else(readOp(dir)).Commit()
		if err != nil {
			return lockx.Result{}, unavailable("acquire", err)
		}
		if resp.Succeeded {
			return b.record(r, resp.Header.Revision, &lease, ttl, p.value, req.Lease, start)
		}
		v = b.parseView(dir, resp.Header.Revision, resp.Responses[0].GetResponseRange().Kvs)
	} else {
		var err error
		if v, err = b.read(ctx, dir); err != nil {
			return lockx.Result{}, unavailable("acquire", err)
		}
	}
	for try := 0; ; try++ {
		if e := v.holder(r.name); e != nil {
			// Granted by an earlier attempt whose reply was lost.
			return b.adopt(ctx, r, e, req.Lease, start)
		}
		if q == nil {
			for _, e := range v.queue {
				if e.name == r.name { // queued by an attempt whose reply was lost
					q = &queued{rev: e.rev, lease: e.lease, ttl: b.queueTTL(req)}
					b.addQueued(r, q)
				}
			}
		}
		ok, value, err := p.decide(&v, q)
		if err != nil {
			return lockx.Result{}, err
		}
		if !ok || try == maxConflicts {
			break
		}
		if lease == 0 {
			if lease, ttl, err = b.grant(ctx, req.Lease); err != nil {
				return lockx.Result{}, unavailable("acquire", err)
			}
		}
		// Granted on v: commit only if no holder appeared or changed since
		// (holders leaving only helps), and if we are not queued, no waiter
		// queued up ahead of us either.
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(dir+"h/"), "<", v.rev+1).WithPrefix()}
		ops := []clientv3.Op{clientv3.OpPut(hkey, value, clientv3.WithLease(lease))}
		if q != nil {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(qkey), "=", q.rev))
			ops = append(ops, clientv3.OpDelete(qkey))
		} else {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(dir+"q/"), "<", v.rev+1).WithPrefix())
		}
		resp, err := b.cli.Txn(ctx).If(cmps...).Then(ops...).Else(readOp(dir)).Commit()
		if err != nil {
			return lockx.Result{}, unavailable("acquire", err)
		}
		if resp.Succeeded {
			if q != nil {
				b.dropQueued(r, q)
				b.revokeLater(q.lease)
			}
			return b.record(r, resp.Header.Revision, &lease, ttl, value, req.Lease, start)
		}
		v = b.parseView(dir, resp.Header.Revision, resp.Responses[0].GetResponseRange().Kvs)
		if q != nil && !hasQueued(&v, r.name, q.rev) {
			b.dropQueued(r, q) // our entry ran out meanwhile
			q = nil
		}
	}
	if req.Wait && p.queue && q == nil {
		var err error
		if q, err = b.enqueue(ctx, r, qkey, p.qvalue, req); err != nil {
			return lockx.Result{}, err
		}
	}
	if req.Wait {
		b.arm(req.Key, req.Owner, b.watchTarget(dir, &v, q, p, r.name))
	}
	return lockx.Result{}, nil
}

func hasQueued(v *view, name string, rev int64) bool {
	for _, e := range v.queue {
		if e.name == name && e.rev == rev {
			return true
		}
	}
	return false
}

func (b *Backend) queueTTL(req lockx.Request) time.Duration {
	if req.QueueTTL > 0 {
		return req.QueueTTL
	}
	return b.cfg.queueTTL
}

// enqueue writes r's queue entry on a lease of its own, so a waiter that
// dies leaves the queue when the lease runs out.
func (b *Backend) enqueue(ctx context.Context, r ref, qkey, value string, req lockx.Request) (*queued, error) {
	qttl := b.queueTTL(req)
	lease, _, err := b.grant(ctx, qttl)
	if err != nil {
		return nil, unavailable("acquire", err)
	}
	resp, err := b.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(qkey), "=", 0)).
		Then(clientv3.OpPut(qkey, value, clientv3.WithLease(lease))).
		Else(clientv3.OpGet(qkey)).Commit()
	if err != nil {
		b.revokeLater(lease)
		return nil, unavailable("acquire", err)
	}
	q := &queued{rev: resp.Header.Revision, lease: lease, ttl: qttl}
	if !resp.Succeeded {
		b.revokeLater(lease)
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return nil, nil
		}
		q = &queued{rev: kvs[0].CreateRevision, lease: clientv3.LeaseID(kvs[0].Lease), ttl: qttl}
	}
	b.addQueued(r, q)
	return q, nil
}

// watchTarget says what a refused waiter waits for: the deletion of the
// queue entry just ahead of it when the queue is ordered (each waiter
// watches only its predecessor, so a release wakes one waiter, not all),
// else the deletion of any holder.
func (b *Backend) watchTarget(dir string, v *view, q *queued, p policy, name string) target {
	if q != nil && p.ordered {
		var pred *entry
		for i := range v.queue {
			e := &v.queue[i]
			if e.name != name && e.rev < q.rev {
				pred = e
			}
		}
		if pred != nil {
			return target{key: dir + "q/" + pred.name, from: v.rev + 1}
		}
	}
	return target{key: dir + "h/", prefix: true, from: v.rev + 1}
}

// record keeps a fresh grant and answers the attempt. It takes the lease
// from *lease so the caller's deferred revocation skips it.
func (b *Backend) record(r ref, rev int64, lease *clientv3.LeaseID, ttl int64, value string, d time.Duration, start time.Time) (lockx.Result, error) {
	h := &held{rev: rev, lease: *lease, ttl: ttl, value: value, deadline: start.Add(d)}
	*lease = 0
	b.addHeld(r, h)
	return b.granted(rev, d)
}

func (b *Backend) granted(rev int64, d time.Duration) (lockx.Result, error) {
	t, err := token(rev)
	if err != nil {
		return lockx.Result{}, unavailable("acquire", err)
	}
	return lockx.Result{Acquired: true, Token: t, TTL: d}, nil
}

// adopt takes over a holder entry that the owner's earlier attempt
// created but whose reply never arrived.
func (b *Backend) adopt(ctx context.Context, r ref, e *entry, d time.Duration, start time.Time) (lockx.Result, error) {
	ka, err := b.cli.KeepAliveOnce(ctx, e.lease)
	if notFound(err) {
		return lockx.Result{}, nil // it ran out just now: refused, try again
	}
	if err != nil {
		return lockx.Result{}, unavailable("acquire", err)
	}
	h := &held{rev: e.rev, lease: e.lease, ttl: ka.TTL, value: e.value, deadline: start.Add(d)}
	b.addHeld(r, h)
	if err := b.renew(ctx, r, h, d, start); err != nil {
		if err == lockx.ErrNotHeld {
			return lockx.Result{}, nil
		}
		return lockx.Result{}, err
	}
	return b.granted(h.rev, d)
}

// renew resets h's lease to d: a keep-alive when the granted TTL covers d,
// else a move of the entry to a new, longer lease (same key, same create
// revision, so the same token).
func (b *Backend) renew(ctx context.Context, r ref, h *held, d time.Duration, start time.Time) error {
	b.mu.Lock()
	deadline, ttl, id := h.deadline, h.ttl, h.lease
	b.mu.Unlock()
	if !start.Before(deadline) { // the lease the caller asked for is over
		b.dropHeld(r, h)
		b.revokeLater(id)
		return lockx.ErrNotHeld
	}
	if secs(d) <= ttl {
		if _, err := b.cli.KeepAliveOnce(ctx, id); err != nil {
			if notFound(err) {
				b.dropHeld(r, h)
				return lockx.ErrNotHeld
			}
			return unavailable("extend", err)
		}
	} else {
		nid, nttl, err := b.moveLease(ctx, b.hkey(r), h.rev, h.value, d)
		if err != nil {
			if err == lockx.ErrNotHeld {
				b.dropHeld(r, h)
			}
			return err
		}
		b.revokeLater(id)
		b.mu.Lock()
		h.lease, h.ttl = nid, nttl
		b.mu.Unlock()
	}
	b.setDeadline(h, start.Add(d))
	return nil
}

// moveLease puts the entry at key (created at rev) on a new lease of at
// least d, keeping its value. The comparison on the create revision makes
// sure it is still the same grant.
func (b *Backend) moveLease(ctx context.Context, key string, rev int64, value string, d time.Duration) (clientv3.LeaseID, int64, error) {
	nid, nttl, err := b.grant(ctx, d)
	if err != nil {
		return 0, 0, unavailable("extend", err)
	}
	resp, err := b.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
		Then(clientv3.OpPut(key, value, clientv3.WithLease(nid))).Commit()
	if err != nil {
		b.revokeLater(nid)
		return 0, 0, unavailable("extend", err)
	}
	if !resp.Succeeded {
		b.revokeLater(nid)
		return 0, 0, lockx.ErrNotHeld
	}
	return nid, nttl, nil
}

// extend renews r's hold to d, or returns lockx.ErrNotHeld.
func (b *Backend) extend(ctx context.Context, r ref, d time.Duration) error {
	if b.cfg.err != nil {
		return b.cfg.err
	}
	start := time.Now()
	if h := b.getHeld(r); h != nil {
		return b.renew(ctx, r, h, d, start)
	}
	// Another backend's grant (or one whose reply was lost): renew it by
	// its lease, found on the entry.
	resp, err := b.cli.Get(ctx, b.hkey(r))
	if err != nil {
		return unavailable("extend", err)
	}
	if len(resp.Kvs) == 0 {
		return lockx.ErrNotHeld
	}
	kv := resp.Kvs[0]
	ka, err := b.cli.KeepAliveOnce(ctx, clientv3.LeaseID(kv.Lease))
	if notFound(err) {
		return lockx.ErrNotHeld
	}
	if err != nil {
		return unavailable("extend", err)
	}
	if secs(d) > ka.TTL {
		if _, _, err := b.moveLease(ctx, b.hkey(r), kv.CreateRevision, string(kv.Value), d); err != nil {
			return err
		}
		b.revokeLater(clientv3.LeaseID(kv.Lease))
	}
	return nil
}

// release frees r's hold and withdraws its queue entry. Both go by
// revoking the entry's own lease: lease ids are never reused, so a late or
// retried release can only remove the grant it was made for, never a newer
// grant of the same key to the same owner (etcd#22082).
func (b *Backend) release(ctx context.Context, r ref) error {
	if b.cfg.err != nil {
		return b.cfg.err
	}
	q, h := b.takeQueued(r), b.takeHeld(r)
	var qerr error
	if q != nil {
		if _, err := b.cli.Revoke(ctx, q.lease); err != nil && !notFound(err) {
			qerr = unavailable("release", err)
		}
	}
	if h != nil {
		_, err := b.cli.Revoke(ctx, h.lease)
		switch {
		case err == nil:
			return nil
		case notFound(err):
			return lockx.ErrNotHeld
		default:
			return unavailable("release", err)
		}
	}
	// Not granted here: another backend's grant (a force release), or a
	// grant whose reply was lost. Find the entries and revoke their leases.
	ops := []clientv3.Op{clientv3.OpGet(b.hkey(r))}
	if q == nil {
		ops = append(ops, clientv3.OpGet(b.qkey(r)))
	}
	resp, err := b.cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return unavailable("release", err)
	}
	if q == nil {
		if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) > 0 {
			if _, err := b.cli.Revoke(ctx, clientv3.LeaseID(kvs[0].Lease)); err != nil && !notFound(err) {
				qerr = unavailable("release", err)
			}
		}
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		if qerr != nil {
			return qerr
		}
		return lockx.ErrNotHeld
	}
	_, err = b.cli.Revoke(ctx, clientv3.LeaseID(kvs[0].Lease))
	switch {
	case err == nil:
		return nil
	case notFound(err):
		return lockx.ErrNotHeld
	default:
		return unavailable("release", err)
	}
}

// ttl returns the lease left on r's hold.
func (b *Backend) ttl(ctx context.Context, r ref) (time.Duration, error) {
	if b.cfg.err != nil {
		return 0, b.cfg.err
	}
	if h := b.getHeld(r); h != nil {
		b.mu.Lock()
		left, id := time.Until(h.deadline), h.lease
		b.mu.Unlock()
		if left <= 0 {
			return 0, lockx.ErrNotHeld
		}
		resp, err := b.cli.TimeToLive(ctx, id)
		if err != nil {
			return 0, unavailable("ttl", err)
		}
		if resp.TTL < 0 {
			b.dropHeld(r, h)
			return 0, lockx.ErrNotHeld
		}
		return left, nil
	}
	resp, err := b.cli.Get(ctx, b.hkey(r))
	if err != nil {
		return 0, unavailable("ttl", err)
	}
	if len(resp.Kvs) == 0 {
		return 0, lockx.ErrNotHeld
	}
	return b.leaseLeft(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
}

// leaseLeft is what etcd says is left of a lease (whole seconds; a lease
// in its last second reports 1 s).
func (b *Backend) leaseLeft(ctx context.Context, id clientv3.LeaseID) (time.Duration, error) {
	resp, err := b.cli.TimeToLive(ctx, id)
	if err != nil {
		return 0, unavailable("ttl", err)
	}
	if resp.TTL < 0 {
		return 0, lockx.ErrNotHeld
	}
	return time.Duration(max(resp.TTL, 1)) * time.Second, nil
}
