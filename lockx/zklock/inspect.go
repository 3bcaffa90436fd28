package zklock

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/lockx-go/lockx/lockx/driver"
)

// Locks implements driver.Inspector: it lists the key directories under
// <root>/locks and reports the holder (the lowest node) of each key that
// matches prefix. One listing per key, plus one read per holder.
func (b *Backend) Locks(ctx context.Context, prefix string, fn func(driver.LockInfo) bool) error {
	if err := ctx.Err(); err != nil {
		return driver.Unavailable("locks", err)
	}
	if err := b.noSession(); err != nil {
		return driver.Unavailable("locks", err)
	}
	dirs, _, err := b.conn.Children(b.root + "/" + kindLock.dir)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return driver.Unavailable("locks", err)
	}
	for _, d := range dirs {
		key, ok := unescape(d)
		if !ok || !strings.HasPrefix(key, prefix) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return driver.Unavailable("locks", err)
		}
		info, err := b.Lock(ctx, key)
		if errors.Is(err, driver.ErrNotHeld) {
			continue
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

// Lock implements driver.Inspector: the holder of key is the owner of its
// lowest node; its token is that node's czxid, its age the time since the
// node's creation (server clock), its waiters the nodes behind it. The
// lease left is known only for holds of this Backend (0 otherwise: a
// holder's lease lives in its own process).
func (b *Backend) Lock(ctx context.Context, key string) (driver.LockInfo, error) {
	if key == "" {
		return driver.LockInfo{}, &driver.ArgError{Arg: "key", Reason: "empty"}
	}
	if err := ctx.Err(); err != nil {
		return driver.LockInfo{}, driver.Unavailable("lock", err)
	}
	if err := b.noSession(); err != nil {
		return driver.LockInfo{}, driver.Unavailable("lock", err)
	}
	dir := b.dirOf(kindLock, key)
	for look := 0; look < 4; look++ {
		children, _, err := b.conn.Children(dir)
		if errors.Is(err, zk.ErrNoNode) {
			return driver.LockInfo{}, driver.ErrNotHeld
		}
		if err != nil {
			return driver.LockInfo{}, driver.Unavailable("lock", err)
		}
		nodes := sortedNodes(children)
		if len(nodes) == 0 {
			return driver.LockInfo{}, driver.ErrNotHeld
		}
		head := nodes[0]
		ok, st, err := b.conn.Exists(dir + "/" + head.name)
		if err != nil {
			return driver.LockInfo{}, driver.Unavailable("lock", err)
		}
		if !ok {
			continue // released meanwhile: look again
		}
		owner, _ := unescape(head.owner)
		info := driver.LockInfo{
			Key:     key,
			Owner:   driver.Owner(owner),
			Token:   driver.Token(st.Czxid),
			Age:     max(0, time.Since(time.UnixMilli(st.Ctime))),
			Waiters: len(nodes) - 1,
		}
		b.mu.Lock()
		if e := b.entries[entryKey{kindLock.ns, key, info.Owner}]; e != nil && e.held && e.path == dir+"/"+head.name {
			info.TTL = max(0, time.Until(e.deadline))
		}
		b.mu.Unlock()
		return info, nil
	}
	return driver.LockInfo{}, driver.Unavailable("lock", errQueueChurn)
}

// unescape reverses escape; ok is false for a name escape cannot make.
func unescape(s string) (string, bool) {
	if !strings.Contains(s, "%") {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", false
		}
		b.WriteByte(byte(v))
		i += 2
	}
	return b.String(), true
}

var _ driver.Inspector = (*Backend)(nil)
