package memlock

import (
	"context"
	"github.com/lockx-go/lockx/lockx/driver"
)

var (
	_ driver.ManyAcquirer = (*Backend)(nil)
	_ driver.ManyReleaser = (*Backend)(nil)
)

// AcquireMany implements driver.ManyAcquirer: one all-or-nothing attempt at
// every request, for one owner, without waiting, under the Backend's mutex.
// Every key is checked before any is written: either each is granted (a
// key the owner already holds is re-granted with its token, as Acquire
// does) or none is, and a refused set reports each holder's remaining
// lease. Client.AcquireMany thus takes a set in one call instead of one
// attempt per key.
func (b *Backend) AcquireMany(ctx context.Context, reqs []driver.Request) ([]driver.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := driver.CheckManyRequests(reqs); err != nil {
		return nil, err
	}
	res := make([]driver.Result, len(reqs))
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	refused := false
	for i, r := range reqs {
		e := b.live(r.Key, now)
		if e != nil && e.owner == r.Owner {
			continue
		}
		if !mayGrant(r, e) {
			refused = true
			res[i].TTL = holderTTL(e, now)
		}
	}
	if refused {
		return res, nil
	}
	for i, r := range reqs {
		// Looked up again: an earlier request of the set may have written it.
		e := b.live(r.Key, now)
		if e != nil && e.owner == r.Owner {
			res[i] = regrant(r, e, now)
			continue
		}
		res[i] = b.grant(r, e, now)
	}
	return res, nil
}

// ReleaseMany implements driver.ManyReleaser: each key released from owner as
// Release would, under one hold of the Backend's mutex.
func (b *Backend) ReleaseMany(ctx context.Context, keys []string, owner driver.Owner) []error {
	errs := make([]error, len(keys))
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	for i, k := range keys {
		errs[i] = b.release(k, owner, now)
	}
	return errs
}
