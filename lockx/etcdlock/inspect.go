package etcdlock

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/lockx-go/lockx/lockx"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Locks calls fn with every plain lock held under key prefix
// (lockx.Inspector). TTL is what etcd reports for the holder's lease, in
// whole seconds; Age comes from the grant time the holder wrote (its
// clock).
func (b *Backend) Locks(ctx context.Context, prefix string, fn func(lockx.LockInfo) bool) error {
	if b.cfg.err != nil {
		return b.cfg.err
	}
	base := b.cfg.prefix + kindLock
	resp, err := b.cli.Get(ctx, base, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return unavailable("locks", err)
	}
	type dirInfo struct {
		info    lockx.LockInfo
		lease   clientv3.LeaseID
		held    bool
		waiters int
	}
	var order []string
	dirs := make(map[string]*dirInfo)
	for _, kv := range resp.Kvs {
		key, part, name, ok := splitEntry(strings.TrimPrefix(string(kv.Key), base))
		if !ok || !strings.HasPrefix(key, prefix) {
			continue
		}
		d := dirs[key]
		if d == nil {
			d = &dirInfo{info: lockx.LockInfo{Key: key}}
			dirs[key] = d
			order = append(order, key)
		}
		switch part {
		case "q":
			d.waiters++
		case "h":
			d.held = true
			d.lease = clientv3.LeaseID(kv.Lease)
			d.info.Owner = lockx.Owner(name)
			if t, err := token(kv.CreateRevision); err == nil {
				d.info.Token = t
			}
			d.info.Age = age(string(kv.Value))
		}
	}
	for _, key := range order {
		d := dirs[key]
		if !d.held {
			continue
		}
		d.info.Waiters = d.waiters
		if left, err := b.leaseLeft(ctx, d.lease); err == nil {
			d.info.TTL = left
		} else if err == lockx.ErrNotHeld {
			continue // expired during the scan
		} else {
			return err
		}
		if !fn(d.info) {
			return nil
		}
	}
	return nil
}

// Lock returns the holder of key (lockx.Inspector), or an error matching
// lockx.ErrNotHeld.
func (b *Backend) Lock(ctx context.Context, key string) (lockx.LockInfo, error) {
	if b.cfg.err != nil {
		return lockx.LockInfo{}, b.cfg.err
	}
	v, err := b.read(ctx, b.dir(kindLock, key))
	if err != nil {
		return lockx.LockInfo{}, unavailable("lock", err)
	}
	if len(v.holders) == 0 {
		return lockx.LockInfo{}, lockx.ErrNotHeld
	}
	e := v.holders[0]
	info := lockx.LockInfo{Key: key, Owner: lockx.Owner(e.name), Waiters: len(v.queue), Age: age(e.value)}
	if info.Token, err = token(e.rev); err != nil {
		return lockx.LockInfo{}, unavailable("lock", err)
	}
	if info.TTL, err = b.leaseLeft(ctx, e.lease); err != nil {
		return lockx.LockInfo{}, err
	}
	return info, nil
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
