package memlock

import (
	"context"
	"github.com/lockx-go/lockx/lockx/driver"
	"sort"
	"strings"
	"time"
)

var _ driver.Inspector = (*Backend)(nil)

// Locks implements driver.Inspector, in key order. Age is 0: memlock keeps
// no grant time.
func (b *Backend) Locks(ctx context.Context, prefix string, fn func(driver.LockInfo) bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.mu.Lock()
	now := b.now()
	var infos []driver.LockInfo
	for key := range b.locks {
		if !strings.HasPrefix(key, prefix) {
			continue
		}
		if li, ok := b.info(key, now); ok {
			infos = append(infos, li)
		}
	}
	b.mu.Unlock()
	sort.Slice(infos, func(i, j int) bool { return infos[i].Key < infos[j].Key })
	for _, li := range infos {
		if !fn(li) {
			break
		}
	}
	return nil
}

// Lock implements driver.Inspector.
func (b *Backend) Lock(ctx context.Context, key string) (driver.LockInfo, error) {
	if err := ctx.Err(); err != nil {
		return driver.LockInfo{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if li, ok := b.info(key, b.now()); ok {
		return li, nil
	}
	return driver.LockInfo{}, driver.ErrNotHeld
}

// info describes key's holder; callers hold b.mu.
func (b *Backend) info(key string, now time.Time) (driver.LockInfo, bool) {
	e := b.live(key, now)
	if e == nil || e.owner == "" {
		return driver.LockInfo{}, false
	}
	waiting := map[driver.Owner]bool{}
	for _, q := range e.queue {
		waiting[q.owner] = true
	}
	b.watchers.Owners(key, func(o driver.Owner) {
		if o != e.owner {
			waiting[o] = true
		}
	})
	return driver.LockInfo{Key: key, Owner: e.owner, Token: e.token, TTL: e.expires.Sub(now), Waiters: len(waiting)}, true
}
