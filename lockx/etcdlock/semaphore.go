package etcdlock

import (
	"context"
	"strconv"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/internal/backendkit"
)

// Permits are entries <prefix>s<len>:<key>/h/<owner> whose value is the
// count held; waiters queue as <dir>q/<owner> with the count they want.
// Leases, queue and wake-ups work as for locks; the grant checks the counts.

func semRef(key string, owner driver.Owner) ref {
	return ref{kind: kindSem, key: key, name: string(owner)}
}

func count(e *entry) int64 {
	n, err := strconv.ParseInt(e.value, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

func semPolicy(req driver.PermitRequest) policy {
	value := strconv.FormatInt(req.Count, 10)
	return policy{
		queue: true, ordered: req.Fair, qvalue: value,
		decide: func(v *view, q *queued) (bool, string, error) {
			used := req.Count
			for i := range v.holders {
				used += count(&v.holders[i])
			}
			if req.Fair {
				for i := range v.queue {
					e := &v.queue[i]
					if q != nil && e.rev >= q.rev {
						break
					}
					used += count(e)
				}
			}
			return used <= req.Limit, value, nil
		},
	}
}

// AcquirePermits makes one attempt to take req.Count permits of req.Key
// (lockx.SemaphoreBackend).
func (b *Backend) AcquirePermits(ctx context.Context, req driver.PermitRequest) (driver.Result, error) {
	if err := driver.CheckPermitRequest(req); err != nil {
		return driver.Result{}, err
	}
	return b.attempt(ctx, semRef(req.Key, req.Owner), req.Request, semPolicy(req))
}

// ExtendPermits resets the lease of owner's permits (lockx.SemaphoreBackend).
func (b *Backend) ExtendPermits(ctx context.Context, key string, owner driver.Owner, lease time.Duration) error {
	return b.extend(ctx, semRef(key, owner), lease)
}

// ReleasePermits returns owner's permits and withdraws owner from the
// queue (lockx.SemaphoreBackend).
func (b *Backend) ReleasePermits(ctx context.Context, key string, owner driver.Owner) error {
	return b.release(ctx, semRef(key, owner))
}

// Permits reports the semaphore's usage (lockx.SemaphoreBackend). Entries
// whose lease ran out are gone from etcd already.
func (b *Backend) Permits(ctx context.Context, key string) (driver.PermitUsage, error) {
	if b.cfg.err != nil {
		return driver.PermitUsage{}, b.cfg.err
	}
	v, err := b.read(ctx, b.dir(kindSem, key))
	if err != nil {
		return driver.PermitUsage{}, backendkit.Unavailable("permits", err)
	}
	var u driver.PermitUsage
	for i := range v.holders {
		u.InUse += count(&v.holders[i])
		u.Holders++
	}
	u.Waiting = int64(len(v.queue))
	return u, nil
}
