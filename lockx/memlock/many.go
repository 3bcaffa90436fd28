package memlock

import (
	"context"

	"github.com/lockx-go/lockx/lockx"
)

var (
	_ lockx.ManyAcquirer = (*Backend)(nil)
	_ lockx.ManyReleaser = (*Backend)(nil)
)

// AcquireMany implements lockx.ManyAcquirer: one all-or-nothing attempt at
// every request, for one owner, without waiting, under the Backend's mutex.
// Every key is checked before any is written: either each is granted (a
// key the owner already holds is re-granted with its token, as Acquire
// does) or none is, and a refused set reports each holder's remaining
// lease. Client.AcquireMany thus takes a set in one call instead of one
// attempt per key.
func (b *Backend) AcquireMany(ctx context.Context, reqs []lockx.Request) ([]lockx.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := lockx.CheckManyRequests(reqs); err != nil {
		return nil, err
	}
	res := make([]lockx.Result, len(reqs))
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

// ReleaseMany implements lockx.ManyReleaser: each key released from owner as
// Release would, under one hold of the Backend's mutex.
func (b *Backend) ReleaseMany(ctx context.Context, keys []string, owner lockx.Owner) []error {
	errs := make([]error, len(keys))
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	for i, k := range keys {
		errs[i] = b.release(k, owner, now)
	}
	return errs
}
