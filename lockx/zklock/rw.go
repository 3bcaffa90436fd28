package zklock

import (
	"context"
	"github.com/lockx-go/lockx/lockx/driver"
	"strconv"
	"strings"
	"time"
)

// Read/write locks follow Curator's InterProcessReadWriteLock: readers and
// writers queue as "<owner>-R-<seq>" and "<owner>-W-<seq>" nodes in one
// directory (<root>/rw/<key>). A writer holds when its node is the lowest;
// a fair reader when no writer's node is before its own (writer
// preference), a plain reader when the lowest node is not a writer's
// (reader preference). Each waiter watches one node: a writer its
// predecessor, a reader the last writer before it — so a writer's release
// wakes every reader queued behind it at once, and the last reader's
// release wakes the writer.
//
// Tokens: a write grant's token is its node's czxid; since a writer holds
// only as the lowest node, it is greater than every earlier token of the
// key in either mode. A read grant's token is the czxid of the lowest node
// (the oldest reader present), so readers that overlap share it, it is at
// least the token of every write that completed before, and no writer can
// be granted while the reader holds.
//
// A downgrade (the writer takes the read side) creates "<owner>-D<token>-<seq>",
// granted at once with the write's token, and counted at the head of the
// queue: writers that queued behind the write side wait for it.

// AcquireRW implements driver.RWBackend.
func (b *Backend) AcquireRW(ctx context.Context, mode driver.RWMode, req driver.Request) (driver.Result, error) {
	k, err := rwKind(mode)
	if err != nil {
		return driver.Result{}, err
	}
	if err := checkRequest(req); err != nil {
		return driver.Result{}, err
	}
	if mode == driver.ModeWrite {
		b.mu.Lock()
		r := b.entries[entryKey{kindRead.ns, req.Key, req.Owner}]
		reading := r != nil && r.held
		b.mu.Unlock()
		if reading {
			return driver.Result{}, driver.ErrUpgrade
		}
	}
	var downgrade driver.Token
	if mode == driver.ModeRead {
		b.mu.Lock()
		if w := b.entries[entryKey{kindWrite.ns, req.Key, req.Owner}]; w != nil && w.held {
			downgrade = w.token
		}
		b.mu.Unlock()
	}
	e := b.lockEntry(k, req.Key, req.Owner, true)
	defer b.unlockEntry(e)
	switch {
	case mode == driver.ModeWrite:
		return b.acquireQueued(ctx, e, decideWrite, req)
	case downgrade > 0:
		return b.acquireTagged(ctx, e, "D"+strconv.FormatInt(int64(downgrade), 10), decideRead, req)
	}
	return b.acquireQueued(ctx, e, decideRead, req)
}

// isReadTag matches a reader's node: R, or D<token> for a reader that took
// the read side while holding the write side (a downgrade).
func isReadTag(t string) bool { return t == "R" || strings.HasPrefix(t, "D") }

// tagToken returns the write token a downgrade node carries in its tag.
func tagToken(tag string) (driver.Token, bool) {
	if !strings.HasPrefix(tag, "D") {
		return 0, false
	}
	v, err := strconv.ParseInt(tag[1:], 10, 64)
	if err != nil || v <= 0 {
		return 0, false
	}
	return driver.Token(v), true
}

// downgradesFirst puts downgrade nodes at the head of the queue: the
// reader a writer became holds from the moment it was granted, ahead of
// the writers that queued behind the write side, though its node is newer.
func downgradesFirst(nodes []node) []node {
	out := make([]node, 0, len(nodes))
	for _, n := range nodes {
		if _, ok := tagToken(n.tag); ok {
			out = append(out, n)
		}
	}
	for _, n := range nodes {
		if _, ok := tagToken(n.tag); !ok {
			out = append(out, n)
		}
	}
	return out
}

// ExtendRW implements driver.RWBackend.
func (b *Backend) ExtendRW(ctx context.Context, mode driver.RWMode, key string, owner driver.Owner, lease time.Duration) error {
	k, err := rwKind(mode)
	if err != nil {
		return err
	}
	return b.extend(ctx, k, key, owner, lease)
}

// ReleaseRW implements driver.RWBackend.
func (b *Backend) ReleaseRW(ctx context.Context, mode driver.RWMode, key string, owner driver.Owner) error {
	k, err := rwKind(mode)
	if err != nil {
		return err
	}
	return b.release(ctx, k, key, owner)
}

func rwKind(mode driver.RWMode) (*kind, error) {
	switch mode {
	case driver.ModeRead:
		return kindRead, nil
	case driver.ModeWrite:
		return kindWrite, nil
	}
	return nil, &driver.ArgError{Arg: "mode", Reason: "must be driver.ModeRead or driver.ModeWrite"}
}

// decideWrite is the mutex rule, refusing an upgrade: an owner with a read
// node on the key gets driver.ErrUpgrade (its write node is withdrawn).
func decideWrite(nodes []node, idx int, mine string, req driver.Request) verdict {
	for _, n := range nodes {
		if n.owner == mine && isReadTag(n.tag) {
			return verdict{err: driver.ErrUpgrade}
		}
	}
	return decideExclusive(nodes, idx, mine, req)
}

func decideRead(nodes []node, idx int, mine string, req driver.Request) verdict {
	first := nodes[0]
	if req.Fair {
		lastW := -1
		for i := 0; i < idx; i++ {
			if nodes[i].tag == kindWrite.tag {
				lastW = i
			}
		}
		if lastW >= 0 {
			return verdict{watch: lastW}
		}
	} else if first.tag == kindWrite.tag {
		return verdict{watch: 0}
	}
	return verdict{grant: true, token: 0}
}

var _ driver.RWBackend = (*Backend)(nil)
