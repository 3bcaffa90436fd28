package zklock

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/lockx-go/lockx/lockx"
)

// Semaphores keep their state in the children of <root>/sem/<key>: a holder
// of n permits has "<owner>-H<n>-<seq>", a waiter for n permits
// "<owner>-Q<n>-<seq>", both ephemeral. A grant checks the permits held
// (and, for a fair request, those asked for by the waiters queued ahead)
// against the caller's limit in the listing, and then creates its H node
// in one transaction with a write to the directory conditional on the
// directory's data version seen in that listing: two grants that saw the
// same state cannot both commit, the loser looks again. The write's zxid —
// the H node's czxid — is the permit's token. Grants on one key are thus
// serialised (one per directory version), which bounds a semaphore's grant
// rate to about one listing plus one fsynced write per grant. Waiters
// watch the directory's children (one watch per Backend); a change wakes
// this Backend's waiters in queue order as far as their permits could fit
// (and every non-fair waiter), the rest wait for the next change.

// AcquirePermits implements lockx.SemaphoreBackend.
func (b *Backend) AcquirePermits(ctx context.Context, req lockx.PermitRequest) (lockx.Result, error) {
	if err := checkRequest(req.Request); err != nil {
		return lockx.Result{}, err
	}
	if req.Limit < 1 {
		return lockx.Result{}, &lockx.ArgError{Arg: "limit", Reason: "must be at least 1"}
	}
	if req.Count < 1 || req.Count > req.Limit {
		return lockx.Result{}, &lockx.ArgError{Arg: "count", Reason: "must be between 1 and the limit"}
	}
	e := b.lockEntry(kindSem, req.Key, req.Owner, true)
	defer b.unlockEntry(e)
	start, queueTTL, res, done, err := b.begin(ctx, e, req.Request)
	if done {
		return res, err
	}
	for look := 0; look < 8; look++ {
		b.mu.Lock()
		p, unknown := e.path, e.unknown
		b.mu.Unlock()
		if p == "" && unknown {
			n, err := b.adopt(e)
			if err != nil {
				return lockx.Result{}, lockx.Unavailable("acquire", err)
			}
			if n.name != "" && n.tag[0] == 'H' { // the lost reply was a grant
				b.mu.Lock()
				tok := e.token
				b.mu.Unlock()
				return b.grant(e, start, req.Lease, tok), nil
			}
		}
		nodes, version, err := b.listSem(e, req.Wait)
		if err != nil {
			return lockx.Result{}, lockx.Unavailable("acquire", err)
		}
		b.mu.Lock()
		mySeq, queued, q := e.seq, e.path != "", e.path
		b.mu.Unlock()
		var inUse, ahead int64
		for _, n := range nodes {
			switch {
			case n.tag[0] == 'H':
				inUse += n.count()
			case req.Fair && (!queued || n.seq < mySeq):
				ahead += n.count()
			}
		}
		if inUse+ahead+req.Count <= req.Limit {
			// One transaction: the version check, the H node, and the
			// waiter's Q node gone (so it is never counted twice or not at
			// all).
			ops := []any{
				&zk.SetDataRequest{Path: e.dir, Version: version},
				&zk.CreateRequest{Path: e.dir + "/" + escape(string(req.Owner), false) + "-H" + strconv.FormatInt(req.Count, 10) + "-", Acl: b.acl, Flags: zk.FlagEphemeralSequential},
			}
			if queued {
				ops = append(ops, &zk.DeleteRequest{Path: q, Version: -1})
			}
			c, err := b.multiCreate(e.dir, ops...)
			switch {
			case errors.Is(err, zk.ErrBadVersion):
				continue // another grant since the listing: look again
			case errors.Is(err, zk.ErrNoNode) && queued:
				b.mu.Lock()
				e.path = "" // our Q node was deleted (force-released): look again
				b.mu.Unlock()
				continue
			case err != nil:
				b.createFailed(e, err, start.Add(max(req.Lease, queueTTL)))
				return lockx.Result{}, lockx.Unavailable("acquire", err)
			}
			b.mu.Lock()
			e.path, e.seq = c.path, c.seq
			b.mu.Unlock()
			return b.grant(e, start, req.Lease, c.token), nil
		}
		if !req.Wait {
			b.mu.Lock()
			b.unwatchLocked(e)
			b.mu.Unlock()
			return lockx.Result{}, nil
		}
		if !queued {
			path, err := b.createQueued(e.dir, req.Owner, req.Count)
			if err != nil {
				b.createFailed(e, err, start.Add(queueTTL))
				return lockx.Result{}, lockx.Unavailable("acquire", err)
			}
			n, _ := parseNode(path[len(e.dir)+1:])
			b.mu.Lock()
			e.path, e.seq = path, n.seq
			b.mu.Unlock()
		}
		b.mu.Lock()
		e.count, e.limit = req.Count, req.Limit
		b.mu.Unlock()
		return b.refuse(e, req.Fair, queueTTL), nil
	}
	return lockx.Result{}, lockx.Unavailable("acquire", errQueueChurn)
}

// listSem lists the semaphore's nodes and the directory's data version.
// With watch, e is registered for the directory's next change before the
// listing (which sets the ZooKeeper watch if none is set), so no change
// after the listing is missed.
func (b *Backend) listSem(e *entry, watch bool) ([]node, int32, error) {
	need := false
	if watch {
		b.mu.Lock()
		b.watchLocked(e, e.dir)
		need = !b.armed[e.dir]
		if need {
			b.armed[e.dir] = true
		}
		b.mu.Unlock()
	}
	var children []string
	var st *zk.Stat
	var err error
	if need {
		children, st, _, err = b.conn.ChildrenW(e.dir)
	} else {
		children, st, err = b.conn.Children(e.dir)
	}
	if err != nil {
		if need {
			b.onNode(e.dir)
		}
		if errors.Is(err, zk.ErrNoNode) { // no directory yet: make it, look again
			if err := b.ensureDir(e.dir); err != nil {
				return nil, 0, err
			}
			return b.listSem(e, watch)
		}
		return nil, 0, err
	}
	return semNodes(children), st.Version, nil
}

// semNodes is sortedNodes without names that are not semaphore nodes.
func semNodes(children []string) []node {
	all := sortedNodes(children)
	out := all[:0]
	for _, n := range all {
		if kindSem.match(n.tag) {
			out = append(out, n)
		}
	}
	return out
}

func (b *Backend) createQueued(dir string, owner lockx.Owner, count int64) (string, error) {
	p := dir + "/" + escape(string(owner), false) + "-Q" + strconv.FormatInt(count, 10) + "-"
	path, err := b.conn.Create(p, nil, zk.FlagEphemeralSequential, b.acl)
	if errors.Is(err, zk.ErrNoNode) {
		if err := b.ensureDir(dir); err != nil {
			return "", err
		}
		path, err = b.conn.Create(p, nil, zk.FlagEphemeralSequential, b.acl)
	}
	return path, err
}

// ExtendPermits implements lockx.SemaphoreBackend.
func (b *Backend) ExtendPermits(ctx context.Context, key string, owner lockx.Owner, lease time.Duration) error {
	return b.extend(ctx, kindSem, key, owner, lease)
}

// ReleasePermits implements lockx.SemaphoreBackend.
func (b *Backend) ReleasePermits(ctx context.Context, key string, owner lockx.Owner) error {
	return b.release(ctx, kindSem, key, owner)
}

// Permits implements lockx.SemaphoreBackend: one listing of the
// semaphore's nodes (holders whose lease ended are gone already: their
// Backend deleted them, or their session ended).
func (b *Backend) Permits(ctx context.Context, key string) (lockx.PermitUsage, error) {
	if key == "" {
		return lockx.PermitUsage{}, &lockx.ArgError{Arg: "key", Reason: "empty"}
	}
	if err := ctx.Err(); err != nil {
		return lockx.PermitUsage{}, lockx.Unavailable("permits", err)
	}
	if !b.isLive() {
		return lockx.PermitUsage{}, lockx.Unavailable("permits", ErrNoSession)
	}
	children, _, err := b.conn.Children(b.dirOf(kindSem, key))
	if errors.Is(err, zk.ErrNoNode) {
		return lockx.PermitUsage{}, nil
	}
	if err != nil {
		return lockx.PermitUsage{}, lockx.Unavailable("permits", err)
	}
	var u lockx.PermitUsage
	for _, n := range semNodes(children) {
		switch n.tag[0] {
		case 'H':
			u.InUse += n.count()
			u.Holders++
		case 'Q':
			u.Waiting++
		}
	}
	return u, nil
}

var _ lockx.SemaphoreBackend = (*Backend)(nil)
