package etcdlock

import (
	"cmp"
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/internal/backendkit"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Locks calls fn with every plain lock held under key prefix
// (lockx.Inspector). TTL is what etcd reports for the holder's lease, in
// whole seconds; Age comes from the grant time the holder wrote (its
// clock).
func (b *Backend) Locks(ctx context.Context, prefix string, fn func(driver.LockInfo) bool) error {
	if b.cfg.err != nil {
		return b.cfg.err
	}
	base := b.cfg.prefix + kindLock
	resp, err := b.cli.Get(ctx, base, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return backendkit.Unavailable("locks", err)
	}
	var order []string
	dirs := make(map[string]*view)
	for _, kv := range resp.Kvs {
		key, part, name, ok := splitEntry(strings.TrimPrefix(string(kv.Key), base))
		if !ok || !strings.HasPrefix(key, prefix) {
			continue
		}
		v := dirs[key]
		if v == nil {
			v = &view{}
			dirs[key] = v
			order = append(order, key)
		}
		e := entry{name: name, value: string(kv.Value), rev: kv.CreateRevision, lease: clientv3.LeaseID(kv.Lease)}
		switch part {
		case "h":
			v.holders = append(v.holders, e)
		case "q":
			v.queue = append(v.queue, e)
		}
	}
	for _, key := range order {
		v := dirs[key]
		slices.SortFunc(v.queue, func(a, b entry) int { return cmp.Compare(a.rev, b.rev) })
		info, err := b.info(ctx, key, v)
		if err == driver.ErrNotHeld {
			continue // nobody holds it, or it expired during the scan
		}
		if err != nil {
			return err
		}
		if !fn(info) {
			return nil
		}
	}
	return nil
}

// info describes the holder of a lock directory read as v: its oldest
// entry, a holder entry or else the head of the queue.
func (b *Backend) info(ctx context.Context, key string, v *view) (driver.LockInfo, error) {
	var e entry
	waiters := len(v.queue)
	switch {
	case len(v.holders) > 0:
		e = v.holders[0]
	case len(v.queue) > 0:
		e = v.queue[0]
		waiters--
	default:
		return driver.LockInfo{}, driver.ErrNotHeld
	}
	info := driver.LockInfo{Key: key, Owner: driver.Owner(e.name), Waiters: waiters, Age: age(e.value)}
	var err error
	if info.Token, err = token(e.rev); err != nil {
		return driver.LockInfo{}, backendkit.Unavailable("lock", err)
	}
	if info.TTL, err = b.leaseLeft(ctx, e.lease); err != nil {
		return driver.LockInfo{}, err
	}
	return info, nil
}

// Lock returns the holder of key (lockx.Inspector), or an error matching
// lockx.ErrNotHeld.
func (b *Backend) Lock(ctx context.Context, key string) (driver.LockInfo, error) {
	if b.cfg.err != nil {
		return driver.LockInfo{}, b.cfg.err
	}
	v, err := b.read(ctx, b.dir(kindLock, key))
	if err != nil {
		return driver.LockInfo{}, backendkit.Unavailable("lock", err)
	}
	return b.info(ctx, key, &v)
}

// age is the time since the grant time a holder value records.
func age(value string) time.Duration {
	ms, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		return 0
	}
	return max(time.Since(time.UnixMilli(ms)), 0)
}

// splitEntry parses "<len>:<key>/<h|q>/<name>".
func splitEntry(s string) (key, part, name string, ok bool) {
	n, rest, found := strings.Cut(s, ":")
	if !found {
		return "", "", "", false
	}
	l, err := strconv.Atoi(n)
	if err != nil || l < 0 || len(rest) < l+3 || rest[l] != '/' || rest[l+2] != '/' {
		return "", "", "", false
	}
	return rest[:l], rest[l+1 : l+2], rest[l+3:], true
}
