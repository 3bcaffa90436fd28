package etcdlock

import (
	"context"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/internal/backendkit"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// policy is what differs between locks, read/write holds and permits: when
// an attempt may be granted, and how a refused one waits.
type policy struct {
	// headHolds makes the oldest entry of the directory the holder, queue
	// entries included (plain locks, as in etcd's own recipe): when a
	// holder goes, the head of the queue holds at once, with no write, and
	// its entry's create revision is the token. Other kinds move a waiter
	// to a holder entry when its grant is decided.
	headHolds bool
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
func (b *Backend) attempt(ctx context.Context, r ref, req driver.Request, p policy) (driver.Result, error) {
	if b.cfg.err != nil {
		return driver.Result{}, b.cfg.err
	}
	start := time.Now()
	if h := b.getHeld(r); h != nil {
		err := b.renew(ctx, r, h, req.Lease, start)
		if err == nil {
			return b.granted(h.rev, req.Lease)
		}
		if err != driver.ErrNotHeld {
			return driver.Result{}, err
		}
	}
	dir := b.dir(r.kind, r.key)
	hkey, qkey := dir+"h/"+r.name, dir+"q/"+r.name
	q := b.getQueued(r)
	if q != nil && b.refreshDue(q) {
		sent := time.Now()
		if ka, err := b.cli.KeepAliveOnce(ctx, q.lease.id); notFound(err) {
			b.dropQueued(r, q) // the entry ran out: queue again at the end
			q = nil
		} else if err != nil {
			return driver.Result{}, backendkit.Unavailable("acquire", err)
		} else {
			b.refreshed(q, sent, ka.TTL)
		}
	} else if q != nil {
		b.refreshed(q, time.Time{}, 0)
	}
	var v view
	// An attempt that may have to queue reads first: the fast path's
	// transaction would be a write wasted on a contended key.
	if p.fast && q == nil && !b.waiting(req.Key, req.Owner) && !b.isHot(dir) {
		resp, l, refreshErr, err := b.leasedTxn(ctx, req.Lease, func(id clientv3.LeaseID) clientv3.Txn {
			return b.cli.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(dir), "=", 0).WithPrefix()).
				Then(clientv3.OpPut(hkey, p.value, clientv3.WithLease(id))).
				Else(readOp(dir))
		})
		if err != nil {
			return driver.Result{}, backendkit.Unavailable("acquire", err)
		}
		if resp.Succeeded {
			return b.record(ctx, r, resp.Header.Revision, l, refreshErr, p.value, req.Lease, start)
		}
		b.giveBack(l)
		v = b.parseView(dir, resp.Header.Revision, resp.Responses[0].GetResponseRange().Kvs)
	} else {
		var err error
		if v, err = b.read(ctx, dir); err != nil {
			return driver.Result{}, backendkit.Unavailable("acquire", err)
		}
	}
	for try := 0; ; try++ {
		if e := v.holder(r.name); e != nil {
			// Granted by an earlier attempt whose reply was lost.
			return b.adopt(ctx, r, hkey, e, req.Lease, start)
		}
		if q == nil {
			for _, e := range v.queue {
				if e.name == r.name { // queued by an attempt whose reply was lost
					q = &queued{rev: e.rev, lease: lease{id: e.lease}, ttl: b.queueTTL(req)}
					b.addQueued(r, q)
				}
			}
		}
		if p.headHolds && q != nil && len(v.holders) == 0 && len(v.queue) > 0 && v.queue[0].rev == q.rev {
			return b.grantHead(ctx, r, q, qkey, p.qvalue, req, start)
		}
		ok, value, err := p.decide(&v, q)
		if err != nil {
			return driver.Result{}, err
		}
		if !ok || try == maxConflicts {
			break
		}
		// Granted on v: commit only if no holder appeared or changed since
		// (holders leaving only helps), and if we are not queued, no waiter
		// queued up ahead of us either.
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(dir+"h/"), "<", v.rev+1).WithPrefix()}
		var ops []clientv3.Op
		if q != nil {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(qkey), "=", q.rev))
			ops = append(ops, clientv3.OpDelete(qkey))
		} else {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(dir+"q/"), "<", v.rev+1).WithPrefix())
		}
		resp, l, refreshErr, err := b.leasedTxn(ctx, req.Lease, func(id clientv3.LeaseID) clientv3.Txn {
			return b.cli.Txn(ctx).If(cmps...).Then(append(ops, clientv3.OpPut(hkey, value, clientv3.WithLease(id)))...).Else(readOp(dir))
		})
		if err != nil {
			return driver.Result{}, backendkit.Unavailable("acquire", err)
		}
		if resp.Succeeded {
			if q != nil {
				b.dropQueued(r, q)
				b.giveBack(q.lease)
			}
			return b.record(ctx, r, resp.Header.Revision, l, refreshErr, value, req.Lease, start)
		}
		b.giveBack(l)
		v = b.parseView(dir, resp.Header.Revision, resp.Responses[0].GetResponseRange().Kvs)
		if q != nil && !hasQueued(&v, r.name, q.rev) {
			b.dropQueued(r, q) // our entry ran out meanwhile
			q = nil
		}
	}
	b.markHot(dir)
	if req.Wait && p.queue && q == nil {
		var err error
		if q, err = b.enqueue(ctx, r, qkey, p.qvalue, req); err != nil {
			return driver.Result{}, err
		}
	}
	if req.Wait {
		b.arm(req.Key, req.Owner, watchTarget(dir, &v, q, p, r.name))
	}
	return driver.Result{}, nil
}

func hasQueued(v *view, name string, rev int64) bool {
	for _, e := range v.queue {
		if e.name == name && e.rev == rev {
			return true
		}
	}
	return false
}

func (b *Backend) queueTTL(req driver.Request) time.Duration {
	if req.QueueTTL > 0 {
		return req.QueueTTL
	}
	return b.cfg.queueTTL
}

// enqueue writes r's queue entry on a lease of its own, so a waiter that
// dies leaves the queue when the lease runs out.
func (b *Backend) enqueue(ctx context.Context, r ref, qkey, value string, req driver.Request) (*queued, error) {
	qttl := b.queueTTL(req)
	resp, l, _, err := b.leasedTxn(ctx, qttl, func(id clientv3.LeaseID) clientv3.Txn {
		return b.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(qkey), "=", 0)).
			Then(clientv3.OpPut(qkey, value, clientv3.WithLease(id))).
			Else(clientv3.OpGet(qkey))
	})
	if err != nil {
		return nil, backendkit.Unavailable("acquire", err)
	}
	q := &queued{rev: resp.Header.Revision, lease: l, ttl: qttl}
	if !resp.Succeeded {
		b.giveBack(l)
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return nil, nil
		}
		q = &queued{rev: kvs[0].CreateRevision, lease: lease{id: clientv3.LeaseID(kvs[0].Lease)}, ttl: qttl}
	}
	b.addQueued(r, q)
	return q, nil
}

// watchTarget says what a refused waiter waits for: the deletion of the
// queue entry just ahead of it when the queue is ordered (each waiter
// watches only its predecessor, so a release wakes one waiter, not all);
// at the head of the queue, the deletion of a holder; unqueued, the
// deletion of any entry where a queue entry can hold (plain locks), else
// of any holder.
func watchTarget(dir string, v *view, q *queued, p policy, name string) target {
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
	if q == nil && p.headHolds {
		return target{key: dir, prefix: true, from: v.rev + 1}
	}
	return target{key: dir + "h/", prefix: true, from: v.rev + 1}
}

// grantHead grants r the lock its queue entry, now the oldest entry of
// the directory, holds already. The entry keeps its key and create
// revision (the token). Its lease is the queue's: if that is shorter than
// the lock's, a holder whose watchdog will renew gets what is left of it
// (the first renewal moves the entry to a lease of the lock's length);
// otherwise the entry moves now.
func (b *Backend) grantHead(ctx context.Context, r ref, q *queued, qkey, value string, req driver.Request, start time.Time) (driver.Result, error) {
	b.mu.Lock()
	l := q.lease
	b.mu.Unlock()
	h := &held{key: qkey, rev: q.rev, lease: l, value: value}
	d := req.Lease
	if leaseTTL(d) > l.ttl {
		left := time.Until(l.until) - poolMargin
		if req.Renewed && l.ttl > 0 && left > 0 {
			d = min(d, left)
		} else {
			nl, err := b.moveLease(ctx, qkey, q.rev, value, req.Lease)
			if err != nil {
				if err == driver.ErrNotHeld {
					b.dropQueued(r, q)
					return driver.Result{}, nil // the entry ran out: refused, queue again
				}
				return driver.Result{}, err
			}
			b.giveBack(l)
			h.lease = nl
		}
	}
	b.dropQueued(r, q) // the entry now holds: no withdrawal timer
	h.deadline = start.Add(d)
	b.addHeld(r, h)
	return b.granted(h.rev, d)
}

// record keeps a fresh grant and answers the attempt. A grant whose
// spare lease could not be renewed cannot promise the lease asked for: it
// is taken back and the attempt reported as failed.
func (b *Backend) record(ctx context.Context, r ref, rev int64, l lease, refreshErr error, value string, d time.Duration, start time.Time) (driver.Result, error) {
	if refreshErr != nil {
		b.undo(ctx, b.hkey(r), rev, l)
		return driver.Result{}, backendkit.Unavailable("acquire", refreshErr)
	}
	b.addHeld(r, &held{key: b.hkey(r), rev: rev, lease: l, value: value, deadline: start.Add(d)})
	return b.granted(rev, d)
}

// undo deletes the entry key created at rev and gives its lease back.
func (b *Backend) undo(ctx context.Context, key string, rev int64, l lease) {
	resp, err := b.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).Then(clientv3.OpDelete(key)).Commit()
	if err == nil && resp.Succeeded {
		b.giveBack(l)
		return
	}
	b.revokeLater(l.id)
}

func (b *Backend) granted(rev int64, d time.Duration) (driver.Result, error) {
	t, err := token(rev)
	if err != nil {
		return driver.Result{}, backendkit.Unavailable("acquire", err)
	}
	return driver.Result{Acquired: true, Token: t, TTL: d}, nil
}

// adopt takes over a holder entry that the owner's earlier attempt
// created but whose reply never arrived.
func (b *Backend) adopt(ctx context.Context, r ref, key string, e *entry, d time.Duration, start time.Time) (driver.Result, error) {
	sent := time.Now()
	ka, err := b.cli.KeepAliveOnce(ctx, e.lease)
	if notFound(err) {
		return driver.Result{}, nil // it ran out just now: refused, try again
	}
	if err != nil {
		return driver.Result{}, backendkit.Unavailable("acquire", err)
	}
	l := lease{id: e.lease, ttl: ka.TTL, until: sent.Add(time.Duration(ka.TTL) * time.Second)}
	h := &held{key: key, rev: e.rev, lease: l, value: e.value, deadline: start.Add(d)}
	b.addHeld(r, h)
	if err := b.renew(ctx, r, h, d, start); err != nil {
		if err == driver.ErrNotHeld {
			return driver.Result{}, nil
		}
		return driver.Result{}, err
	}
	return b.granted(h.rev, d)
}

// renew resets h's lease to d: a keep-alive when the granted TTL covers d,
// else a move of the entry to a new, longer lease (same key, same create
// revision, so the same token).
func (b *Backend) renew(ctx context.Context, r ref, h *held, d time.Duration, start time.Time) error {
	b.mu.Lock()
	deadline, l := h.deadline, h.lease
	b.mu.Unlock()
	if !start.Before(deadline) { // the lease the caller asked for is over
		b.dropHeld(r, h)
		b.revokeLater(l.id)
		return driver.ErrNotHeld
	}
	if leaseTTL(d) <= l.ttl {
		sent := time.Now()
		if _, err := b.cli.KeepAliveOnce(ctx, l.id); err != nil {
			if notFound(err) {
				b.dropHeld(r, h)
				return driver.ErrNotHeld
			}
			return backendkit.Unavailable("extend", err)
		}
		l.until = sent.Add(time.Duration(l.ttl) * time.Second)
	} else {
		nl, err := b.moveLease(ctx, h.key, h.rev, h.value, d)
		if err != nil {
			if err == driver.ErrNotHeld {
				b.dropHeld(r, h)
			}
			return err
		}
		b.giveBack(l)
		l = nl
	}
	b.mu.Lock()
	h.lease = l
	b.mu.Unlock()
	b.setDeadline(h, start.Add(d))
	return nil
}

// moveLease puts the entry at key (created at rev) on a new lease of at
// least d, keeping its value. The comparison on the create revision makes
// sure it is still the same grant.
func (b *Backend) moveLease(ctx context.Context, key string, rev int64, value string, d time.Duration) (lease, error) {
	nl, err := b.newLease(ctx, d)
	if err != nil {
		return lease{}, backendkit.Unavailable("extend", err)
	}
	resp, err := b.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).
		Then(clientv3.OpPut(key, value, clientv3.WithLease(nl.id))).Commit()
	if err != nil {
		b.revokeLater(nl.id)
		return lease{}, backendkit.Unavailable("extend", err)
	}
	if !resp.Succeeded {
		b.revokeLater(nl.id)
		return lease{}, driver.ErrNotHeld
	}
	return nl, nil
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
	key, e, _, err := b.lookup(ctx, r)
	if err != nil {
		return backendkit.Unavailable("extend", err)
	}
	if e == nil {
		return driver.ErrNotHeld
	}
	ka, err := b.cli.KeepAliveOnce(ctx, e.lease)
	if notFound(err) {
		return driver.ErrNotHeld
	}
	if err != nil {
		return backendkit.Unavailable("extend", err)
	}
	if leaseTTL(d) > ka.TTL {
		if _, err := b.moveLease(ctx, key, e.rev, e.value, d); err != nil {
			return err
		}
		b.revokeLater(e.lease)
	}
	return nil
}

// release frees r's hold and withdraws its queue entry. This Backend's own
// entries go by a transaction that deletes the key only if its create
// revision is still the grant's: a late or retried release can only remove
// the grant it was made for, never a newer grant of the same key to the
// same owner (etcd#22082). Their leases go back to the pool. Entries of
// other backends (a force release, or a grant whose reply was lost) go by
// revoking the lease found on the key, so that their holder learns at its
// next renewal, if its loss watch has not told it already.
func (b *Backend) release(ctx context.Context, r ref) error {
	if b.cfg.err != nil {
		return b.cfg.err
	}
	q, h := b.takeQueued(r), b.takeHeld(r)
	var qerr error
	if q != nil {
		if _, err := b.deleteEntry(ctx, b.qkey(r), q.rev, q.lease); err != nil {
			qerr = err
		}
	}
	if h != nil {
		b.mu.Lock() // a concurrent renewal may be moving the lease
		l := h.lease
		b.mu.Unlock()
		ok, err := b.deleteEntry(ctx, h.key, h.rev, l)
		switch {
		case err != nil:
			return err
		case !ok:
			return driver.ErrNotHeld
		}
		return nil
	}
	_, e, w, err := b.lookup(ctx, r)
	if err != nil {
		return backendkit.Unavailable("release", err)
	}
	if w != nil && q == nil {
		if _, err := b.cli.Revoke(ctx, w.lease); err != nil && !notFound(err) {
			qerr = backendkit.Unavailable("release", err)
		}
	}
	if e == nil {
		if qerr != nil {
			return qerr
		}
		return driver.ErrNotHeld
	}
	_, err = b.cli.Revoke(ctx, e.lease)
	switch {
	case err == nil:
		return nil
	case notFound(err):
		return driver.ErrNotHeld
	default:
		return backendkit.Unavailable("release", err)
	}
}

// lookup finds, in the store, the entry through which r holds its key
// (nil if it does not) and r's queue entry if it waits.
func (b *Backend) lookup(ctx context.Context, r ref) (key string, hold, wait *entry, err error) {
	dir := b.dir(r.kind, r.key)
	v, err := b.read(ctx, dir)
	if err != nil {
		return "", nil, nil, err
	}
	if e := v.holder(r.name); e != nil {
		return dir + "h/" + r.name, e, nil, nil
	}
	for i := range v.queue {
		if e := &v.queue[i]; e.name == r.name {
			if r.kind == kindLock && i == 0 && len(v.holders) == 0 { // a queue head holds
				return dir + "q/" + r.name, e, nil, nil
			}
			return "", nil, e, nil
		}
	}
	return "", nil, nil, nil
}

// deleteEntry deletes key if it is still the entry created at rev, and
// gives its lease back to the pool. It reports whether it deleted it.
func (b *Backend) deleteEntry(ctx context.Context, key string, rev int64, l lease) (bool, error) {
	resp, err := b.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).Then(clientv3.OpDelete(key)).Commit()
	if err != nil {
		// Unknown outcome: a retry finds the key, if it is still there,
		// and revokes its lease.
		return false, backendkit.Unavailable("release", err)
	}
	if !resp.Succeeded { // gone already (expired, revoked): so is the lease, or it soon will be
		b.revokeLater(l.id)
		return false, nil
	}
	b.giveBack(l)
	return true, nil
}

// ttl returns the lease left on r's hold.
func (b *Backend) ttl(ctx context.Context, r ref) (time.Duration, error) {
	if b.cfg.err != nil {
		return 0, b.cfg.err
	}
	if h := b.getHeld(r); h != nil {
		b.mu.Lock()
		left, id := time.Until(h.deadline), h.lease.id
		b.mu.Unlock()
		if left <= 0 {
			return 0, driver.ErrNotHeld
		}
		resp, err := b.cli.TimeToLive(ctx, id)
		if err != nil {
			return 0, backendkit.Unavailable("ttl", err)
		}
		if resp.TTL < 0 {
			b.dropHeld(r, h)
			return 0, driver.ErrNotHeld
		}
		return left, nil
	}
	_, e, _, err := b.lookup(ctx, r)
	if err != nil {
		return 0, backendkit.Unavailable("ttl", err)
	}
	if e == nil {
		return 0, driver.ErrNotHeld
	}
	return b.leaseLeft(ctx, e.lease)
}

// leaseLeft is what etcd says is left of a lease (whole seconds; a lease
// in its last second reports 1 s).
func (b *Backend) leaseLeft(ctx context.Context, id clientv3.LeaseID) (time.Duration, error) {
	resp, err := b.cli.TimeToLive(ctx, id)
	if err != nil {
		return 0, backendkit.Unavailable("ttl", err)
	}
	if resp.TTL < 0 {
		return 0, driver.ErrNotHeld
	}
	return time.Duration(max(resp.TTL, 1)) * time.Second, nil
}
