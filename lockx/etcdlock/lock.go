package etcdlock

import (
	"context"
	"github.com/lockx-go/lockx/lockx/driver"
	"strconv"
	"sync"
	"time"
)

func lockRef(key string, owner driver.Owner) ref {
	return ref{kind: kindLock, key: key, name: string(owner)}
}

// lockPolicy: one holder, the oldest entry; waiters queue and hold in
// turn, fair or not (a plain waiter's entry is withdrawn shortly after it
// stops waiting, see withdrawLater).
func lockPolicy(req driver.Request) policy {
	now := strconv.FormatInt(time.Now().UnixMilli(), 10) // the grant time, for Age
	return policy{
		fast: true, headHolds: true, queue: true, ordered: true,
		value: now, qvalue: now,
		decide: func(v *view, q *queued) (bool, string, error) {
			return len(v.holders) == 0 && len(v.queue) == 0, now, nil
		},
	}
}

// Acquire makes one attempt to grant req.Key to req.Owner (driver.Backend).
// The lock is the key <prefix>l<len>:<key>/h/<owner> on a lease of its
// own; its create revision is the fencing token.
func (b *Backend) Acquire(ctx context.Context, req driver.Request) (driver.Result, error) {
	return b.attempt(ctx, lockRef(req.Key, req.Owner), req, lockPolicy(req))
}

// Extend resets the lease of key held by owner (driver.Backend).
func (b *Backend) Extend(ctx context.Context, key string, owner driver.Owner, lease time.Duration) error {
	return b.extend(ctx, lockRef(key, owner), lease)
}

// Release frees key if owner holds it and withdraws owner's queue entry
// (driver.Backend).
func (b *Backend) Release(ctx context.Context, key string, owner driver.Owner) error {
	return b.release(ctx, lockRef(key, owner))
}

// TTL returns the lease left on key held by owner (driver.Backend).
func (b *Backend) TTL(ctx context.Context, key string, owner driver.Owner) (time.Duration, error) {
	return b.ttl(ctx, lockRef(key, owner))
}

// maxParallel bounds the renewals of one ExtendMany in flight at once.
const maxParallel = 32

// ExtendMany renews many leases at once (driver.BatchExtender): the
// keep-alives go out concurrently over the client's one connection.
func (b *Backend) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []error {
	errs := make([]error, len(reqs))
	sem := make(chan struct{}, maxParallel)
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = b.Extend(ctx, r.Key, r.Owner, r.Lease)
		}()
	}
	wg.Wait()
	return errs
}
