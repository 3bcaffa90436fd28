package etcdlock

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/internal/backendkit"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// maxManyKeys bounds the keys of one AcquireMany transaction (etcd refuses
// transactions of more than --max-txn-ops operations, 128 by default);
// larger sets are refused here and taken one by one by the Client.
const maxManyKeys = 64

var _ driver.ManyAcquirer = (*Backend)(nil)

// AcquireMany tries a whole set of plain locks in one transaction
// (lockx.ManyAcquirer): every key's directory must be empty, and then each
// gets its holder entry on a lease of its own, all with the transaction's
// revision as token. The leases are taken (spares, else new grants) all at
// once before it. All or nothing: a refused set writes nothing.
func (b *Backend) AcquireMany(ctx context.Context, reqs []driver.Request) ([]driver.Result, error) {
	if b.cfg.err != nil {
		return nil, b.cfg.err
	}
	res := make([]driver.Result, len(reqs))
	if len(reqs) == 0 || len(reqs) > maxManyKeys {
		return res, nil
	}
	if err := driver.CheckManyRequests(reqs); err != nil {
		return nil, err
	}
	start := time.Now()
	ls := make([]lease, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i := range reqs {
		wg.Go(func() { ls[i], errs[i] = b.leaseFor(ctx, reqs[i].Lease) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			for _, l := range ls {
				b.giveBack(l)
			}
			return nil, backendkit.Unavailable("acquire many", err)
		}
	}
	value := strconv.FormatInt(time.Now().UnixMilli(), 10)
	cmps := make([]clientv3.Cmp, len(reqs))
	ops := make([]clientv3.Op, len(reqs))
	for i, r := range reqs {
		dir := b.dir(kindLock, r.Key)
		cmps[i] = clientv3.Compare(clientv3.CreateRevision(dir), "=", 0).WithPrefix()
		ops[i] = clientv3.OpPut(dir+"h/"+string(r.Owner), value, clientv3.WithLease(ls[i].id))
	}
	resp, err := b.cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		// Unknown outcome: revoking the leases removes whatever was put.
		for _, l := range ls {
			b.revokeLater(l.id)
		}
		return nil, backendkit.Unavailable("acquire many", err)
	}
	if !resp.Succeeded {
		for _, l := range ls {
			b.giveBack(l)
		}
		return res, nil
	}
	rev := resp.Header.Revision
	for i, r := range reqs {
		ref := lockRef(r.Key, r.Owner)
		b.addHeld(ref, &held{key: b.hkey(ref), rev: rev, lease: ls[i], value: value, deadline: start.Add(r.Lease)})
		if res[i], err = b.granted(rev, r.Lease); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// leaseFor returns a lease that lives at least d from now, for one entry:
// a spare (renewed first if it is not fresh enough) or a new grant.
func (b *Backend) leaseFor(ctx context.Context, d time.Duration) (lease, error) {
	for {
		l, ok := b.spare(leaseTTL(d))
		if !ok {
			return b.newLease(ctx, d)
		}
		if time.Until(l.until) >= d+poolMargin {
			return l, nil
		}
		sent := time.Now()
		_, err := b.cli.KeepAliveOnce(ctx, l.id)
		if notFound(err) {
			continue
		}
		if err != nil {
			b.giveBack(l)
			return lease{}, err
		}
		l.until = sent.Add(time.Duration(l.ttl) * time.Second)
		return l, nil
	}
}
