package zklock

import (
	"context"
	"errors"
	"path"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/lockx-go/lockx/lockx"
)

// cancelGrace is how long a plain waiter's node outlives the end of its
// last wait (Watch's cancel) before it is withdrawn: the Client's next
// attempt follows within microseconds, a waiter that gave up never comes.
const cancelGrace = 250 * time.Millisecond

type entryKey struct {
	ns    string
	key   string
	owner lockx.Owner
}

// entry is what the Backend knows about one owner's node for one key: the
// node it holds or waits with, its lease or queue deadline, its wake-up
// channels and loss callbacks.
type entry struct {
	k   entryKey
	dir string
	op  sync.Mutex // serialises the calls for (key, owner) that talk to the server

	// guarded by Backend.mu
	busy     int    // calls holding or waiting for op; the entry stays while > 0
	removed  bool   // left the map; a caller that finds it so looks again
	path     string // our node, "" if none
	seq      int64
	token    lockx.Token
	held     bool
	unknown  bool // a create's reply was lost: our node may exist, name unknown
	fair     bool
	deadline time.Time // lease end (held) or queue deadline (waiting)
	timer    *time.Timer
	wakes    []chan struct{}
	pred     string // the predecessor watched for us
	loss     map[*lossReg]struct{}
}

type lossReg struct{ fn func() }

func (b *Backend) dirOf(ns, key string) string {
	return b.root + "/" + ns + "/" + escape(key, true)
}

func checkKeyOwner(key string, owner lockx.Owner) error {
	if key == "" {
		return &lockx.ArgError{Arg: "key", Reason: "empty"}
	}
	if owner == "" {
		return &lockx.ArgError{Arg: "owner", Reason: "empty"}
	}
	return nil
}

// lockEntry returns the entry of k with its op lock held, making it if
// create is set (else nil when there is none).
func (b *Backend) lockEntry(k entryKey, dir string, create bool) *entry {
	for {
		b.mu.Lock()
		e := b.entries[k]
		if e == nil {
			if !create {
				b.mu.Unlock()
				return nil
			}
			e = &entry{k: k, dir: dir}
			b.entries[k] = e
		}
		e.busy++
		b.mu.Unlock()
		e.op.Lock()
		b.mu.Lock()
		removed := e.removed
		if removed {
			e.busy--
		}
		b.mu.Unlock()
		if !removed {
			return e
		}
		e.op.Unlock()
	}
}

func (b *Backend) unlockEntry(e *entry) {
	b.mu.Lock()
	e.busy--
	b.maybeDropLocked(e)
	b.mu.Unlock()
	e.op.Unlock()
}

// maybeDropLocked removes an entry that no longer stands for anything.
func (b *Backend) maybeDropLocked(e *entry) {
	if e.removed || e.busy > 0 || e.held || e.path != "" || e.unknown || len(e.wakes) > 0 {
		return
	}
	if e.timer != nil {
		e.timer.Stop()
	}
	b.unwatchLocked(e)
	e.removed = true
	if b.entries[e.k] == e {
		delete(b.entries, e.k)
	}
}

// armLocked sets e's deadline (lease or queue) and its timer.
func (b *Backend) armLocked(e *entry, deadline time.Time) {
	e.deadline = deadline
	d := time.Until(deadline)
	if e.timer == nil {
		e.timer = time.AfterFunc(d, func() { b.expire(e) })
	} else {
		e.timer.Reset(d)
	}
}

// loseLocked ends a hold the owner no longer has. With orphan its node is
// deleted once the session is back. It returns the loss callbacks to run
// after b.mu is released.
func (b *Backend) loseLocked(e *entry, orphan bool) []func() {
	if orphan && e.path != "" {
		b.orphans = append(b.orphans, e.path)
	}
	e.held, e.path, e.unknown = false, "", false
	if e.timer != nil {
		e.timer.Stop()
	}
	fns := make([]func(), 0, len(e.loss))
	for r := range e.loss {
		fns = append(fns, r.fn)
	}
	e.loss = nil
	b.maybeDropLocked(e)
	return fns
}

func (b *Backend) unwatchLocked(e *entry) {
	if e.pred == "" {
		return
	}
	if set := b.watched[e.pred]; set != nil {
		delete(set, e)
		if len(set) == 0 {
			delete(b.watched, e.pred)
		}
	}
	e.pred = ""
}

// expire runs at an entry's deadline: a lease that was not extended, a
// queue place that was not refreshed, or a create whose outcome stayed
// unknown. It deletes the node, so the next waiter gets the lock.
func (b *Backend) expire(e *entry) {
	b.mu.Lock()
	if b.closed || e.removed {
		b.mu.Unlock()
		return
	}
	b.wg.Add(1)
	e.busy++
	b.mu.Unlock()
	defer b.wg.Done()
	e.op.Lock()
	defer b.unlockEntry(e)

	b.mu.Lock()
	if e.removed || time.Now().Before(e.deadline) {
		if !e.removed && (e.held || e.path != "" || e.unknown) {
			b.armLocked(e, e.deadline)
		}
		b.mu.Unlock()
		return
	}
	p, held, unknown, live := e.path, e.held, e.unknown, b.live
	b.mu.Unlock()

	orphan := false
	switch {
	case !live:
		orphan = true // deleted once the session is back, or gone with it
	case p != "":
		if err := b.conn.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			orphan = true
		}
	case unknown:
		_, _ = b.deleteOwnerNodes(e.dir, e.k.owner)
	}

	b.mu.Lock()
	var fire []func()
	if held {
		fire = b.loseLocked(e, orphan)
	} else {
		if orphan && p != "" {
			b.orphans = append(b.orphans, p)
		}
		e.path, e.unknown = "", false
		b.unwatchLocked(e)
		for _, w := range e.wakes { // a live waiter queues again
			fire = append(fire, func() { notify(w) })
		}
	}
	b.mu.Unlock()
	runAll(fire)
}

// Acquire implements lockx.Backend: it creates the owner's ephemeral
// sequential node under the key's directory (or finds the one it has) and
// grants the lock if that node is the lowest. A refused waiter keeps its
// node (its place in the queue) and watches only its predecessor.
func (b *Backend) Acquire(ctx context.Context, req lockx.Request) (lockx.Result, error) {
	if err := checkKeyOwner(req.Key, req.Owner); err != nil {
		return lockx.Result{}, err
	}
	if req.Lease <= 0 {
		return lockx.Result{}, &lockx.ArgError{Arg: "lease", Reason: "must be positive"}
	}
	e := b.lockEntry(entryKey{nsLocks, req.Key, req.Owner}, b.dirOf(nsLocks, req.Key), true)
	defer b.unlockEntry(e)
	return b.acquireLocked(ctx, e, req)
}

var errQueueChurn = errors.New("zklock: the queue changed under every look")

func (b *Backend) acquireLocked(ctx context.Context, e *entry, req lockx.Request) (lockx.Result, error) {
	if err := ctx.Err(); err != nil {
		return lockx.Result{}, lockx.Unavailable("acquire", err)
	}
	if !b.isLive() {
		return lockx.Result{}, lockx.Unavailable("acquire", ErrNoSession)
	}
	queueTTL := req.QueueTTL
	if queueTTL <= 0 {
		queueTTL = lockx.DefaultQueueTTL
	}
	start := time.Now()
	b.mu.Lock()
	held, p := e.held, e.path
	b.mu.Unlock()
	if held { // a retry by the holder: same token, lease reset
		ok, _, err := b.conn.Exists(p)
		if err != nil {
			return lockx.Result{}, lockx.Unavailable("acquire", err)
		}
		b.mu.Lock()
		if ok {
			b.armLocked(e, start.Add(req.Lease))
			tok := e.token
			b.mu.Unlock()
			return lockx.Result{Acquired: true, Token: tok, TTL: req.Lease}, nil
		}
		fire := b.loseLocked(e, false) // deleted behind our back: start afresh
		b.mu.Unlock()
		runAll(fire)
	}
	hadNode := p != "" && !held
	for look := 0; look < 4; look++ {
		b.mu.Lock()
		p, unknown := e.path, e.unknown
		b.mu.Unlock()
		if p == "" && unknown {
			if err := b.adopt(e); err != nil {
				return lockx.Result{}, lockx.Unavailable("acquire", err)
			}
			b.mu.Lock()
			p = e.path
			b.mu.Unlock()
		}
		if p == "" {
			c, err := b.create(e.dir, e.k.owner)
			if err != nil {
				if !definite(err) {
					b.mu.Lock()
					e.unknown = true
					b.armLocked(e, start.Add(max(req.Lease, queueTTL)))
					b.mu.Unlock()
				}
				return lockx.Result{}, lockx.Unavailable("acquire", err)
			}
			b.mu.Lock()
			e.path, e.seq, e.token, e.unknown = c.path, c.seq, c.token, false
			b.mu.Unlock()
			if c.children == 1 { // ours is the only node: no listing needed
				return b.grant(e, start, req.Lease), nil
			}
		}
		children, _, err := b.conn.Children(e.dir)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return lockx.Result{}, lockx.Unavailable("acquire", err)
		}
		nodes := sortedNodes(children)
		idx := -1
		for i, n := range nodes {
			if n.seq == e.seq {
				idx = i
				break
			}
		}
		if idx < 0 { // our node is gone (deleted by an operator): queue again
			b.mu.Lock()
			e.path = ""
			b.mu.Unlock()
			continue
		}
		if idx == 0 {
			return b.grant(e, start, req.Lease), nil
		}
		if !req.Wait && !hadNode { // a try leaves no trace
			if err := b.conn.Delete(e.dir+"/"+nodes[idx].name, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				b.mu.Lock()
				e.path, e.unknown = "", true
				b.armLocked(e, start.Add(queueTTL))
				b.mu.Unlock()
				return lockx.Result{}, lockx.Unavailable("acquire", err)
			}
			b.mu.Lock()
			e.path = ""
			b.mu.Unlock()
			return lockx.Result{}, nil
		}
		gone, err := b.watchPred(e, e.dir+"/"+nodes[idx-1].name)
		if err != nil {
			return lockx.Result{}, lockx.Unavailable("acquire", err)
		}
		if gone { // the predecessor left between the listing and the watch
			continue
		}
		b.mu.Lock()
		e.fair = req.Fair
		b.armLocked(e, time.Now().Add(queueTTL))
		b.mu.Unlock()
		return lockx.Result{}, nil
	}
	return lockx.Result{}, lockx.Unavailable("acquire", errQueueChurn)
}

func (b *Backend) grant(e *entry, start time.Time, lease time.Duration) lockx.Result {
	b.mu.Lock()
	defer b.mu.Unlock()
	e.held = true
	b.unwatchLocked(e)
	b.armLocked(e, start.Add(lease))
	return lockx.Result{Acquired: true, Token: e.token, TTL: lease}
}

type created struct {
	path     string
	seq      int64
	token    lockx.Token
	children int32
}

// create makes owner's ephemeral sequential node under dir. The node and
// an empty write to dir go in one transaction, whose zxid — the node's
// czxid — comes back as dir's mzxid, together with dir's child count: so
// one round trip gives the fencing token and, when the node is alone, the
// grant. dir is a container node, created on demand and removed by the
// server once empty.
func (b *Backend) create(dir string, owner lockx.Owner) (created, error) {
	prefix := dir + "/" + escape(string(owner), false) + "-"
	for try := 0; ; try++ {
		res, err := b.conn.Multi(
			&zk.CreateRequest{Path: prefix, Acl: b.acl, Flags: zk.FlagEphemeralSequential},
			&zk.SetDataRequest{Path: dir, Version: -1},
		)
		if errors.Is(err, zk.ErrNoNode) && try < 3 {
			if err := b.ensureDir(dir); err != nil {
				return created{}, err
			}
			continue
		}
		if err != nil {
			return created{}, err
		}
		if len(res) != 2 || res[1].Stat == nil {
			return created{}, errors.New("zklock: malformed multi reply")
		}
		n, ok := parseNode(path.Base(res[0].String))
		if !ok {
			return created{}, errors.New("zklock: unexpected node name " + res[0].String)
		}
		return created{path: res[0].String, seq: n.seq, token: lockx.Token(res[1].Stat.Mzxid), children: res[1].Stat.NumChildren}, nil
	}
}

func (b *Backend) ensureDir(dir string) error {
	_, err := b.conn.CreateContainer(dir, nil, zk.FlagContainer, b.acl)
	if errors.Is(err, zk.ErrNoNode) { // the root was removed: make it again
		if err := b.ensurePath(path.Dir(dir)); err != nil {
			return err
		}
		_, err = b.conn.CreateContainer(dir, nil, zk.FlagContainer, b.acl)
	}
	if err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return err
	}
	return nil
}

// definite reports whether err proves that a create did not happen.
func definite(err error) bool {
	for _, d := range []error{zk.ErrNoServer, zk.ErrSessionExpired, zk.ErrNodeExists, zk.ErrNoAuth, zk.ErrInvalidACL, zk.ErrBadArguments, zk.ErrNoChildrenForEphemerals} {
		if errors.Is(err, d) {
			return true
		}
	}
	return false
}

// adopt finds the node a create with a lost reply made (Curator's
// protected mode: the owner is in the name) and makes it e's; it deletes
// any further node of the same owner.
func (b *Backend) adopt(e *entry) error {
	children, _, err := b.conn.Children(e.dir)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return err
	}
	mine := escape(string(e.k.owner), false)
	found := ""
	var seq int64
	for _, n := range sortedNodes(children) {
		if n.owner != mine {
			continue
		}
		p := e.dir + "/" + n.name
		if found == "" {
			found, seq = p, n.seq
		} else if err := b.conn.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
	}
	var tok lockx.Token
	if found != "" {
		ok, st, err := b.conn.Exists(found)
		if err != nil {
			return err
		}
		if !ok {
			found = ""
		} else {
			tok = lockx.Token(st.Czxid)
		}
	}
	b.mu.Lock()
	e.path, e.seq, e.token, e.unknown = found, seq, tok, false
	b.mu.Unlock()
	return nil
}

// deleteOwnerNodes deletes owner's nodes under dir and reports whether it
// found any.
func (b *Backend) deleteOwnerNodes(dir string, owner lockx.Owner) (bool, error) {
	children, _, err := b.conn.Children(dir)
	if errors.Is(err, zk.ErrNoNode) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	mine := escape(string(owner), false)
	found := false
	for _, n := range sortedNodes(children) {
		if n.owner != mine {
			continue
		}
		if err := b.conn.Delete(dir+"/"+n.name, -1); err == nil {
			found = true
		} else if !errors.Is(err, zk.ErrNoNode) {
			return found, err
		}
	}
	return found, nil
}

// watchPred registers e for the deletion of its predecessor p. It sets
// at most one ZooKeeper watch per node, however many local waiters share
// it. gone reports that p no longer exists.
func (b *Backend) watchPred(e *entry, p string) (gone bool, err error) {
	b.mu.Lock()
	if e.pred != p {
		b.unwatchLocked(e)
		set := b.watched[p]
		if set == nil {
			set = make(map[*entry]struct{})
			b.watched[p] = set
		}
		set[e] = struct{}{}
		e.pred = p
	}
	need := !b.armed[p]
	if need {
		b.armed[p] = true
	}
	b.mu.Unlock()
	if !need {
		return false, nil
	}
	// GetW, not ExistsW: on a missing node ExistsW would leave a watch for
	// its creation, which never comes (sequence numbers are not reused).
	_, _, _, err = b.conn.GetW(p)
	if err == nil {
		return false, nil
	}
	b.onNode(p) // wake every local waiter of p: they look again
	if errors.Is(err, zk.ErrNoNode) {
		return true, nil
	}
	return false, err
}

// Extend implements lockx.Backend: it checks that the owner's node still
// exists (a read, served by the connected server) and resets the lease
// timer that deletes the node. While disconnected it returns an error
// matching lockx.ErrUnavailable and ErrNoSession.
func (b *Backend) Extend(ctx context.Context, key string, owner lockx.Owner, lease time.Duration) error {
	if err := checkKeyOwner(key, owner); err != nil {
		return err
	}
	if lease <= 0 {
		return &lockx.ArgError{Arg: "lease", Reason: "must be positive"}
	}
	e := b.lockEntry(entryKey{nsLocks, key, owner}, "", false)
	if e == nil {
		return lockx.ErrNotHeld
	}
	defer b.unlockEntry(e)
	start := time.Now()
	p, err := b.checkHeld(ctx, e, "extend")
	if err != nil {
		return err
	}
	b.mu.Lock()
	if e.path == p && e.held {
		b.armLocked(e, start.Add(lease))
	}
	b.mu.Unlock()
	return nil
}

// checkHeld verifies that e is held and its node exists; a node found gone
// ends the hold (loss callbacks run) with ErrNotHeld.
func (b *Backend) checkHeld(ctx context.Context, e *entry, op string) (string, error) {
	b.mu.Lock()
	held, p, live := e.held, e.path, b.live
	b.mu.Unlock()
	if !held {
		return "", lockx.ErrNotHeld
	}
	if err := ctx.Err(); err != nil {
		return "", lockx.Unavailable(op, err)
	}
	if !live {
		return "", lockx.Unavailable(op, ErrNoSession)
	}
	ok, _, err := b.conn.Exists(p)
	if err != nil {
		return "", lockx.Unavailable(op, err)
	}
	if !ok {
		b.mu.Lock()
		var fire []func()
		if e.path == p {
			fire = b.loseLocked(e, false)
		}
		b.mu.Unlock()
		runAll(fire)
		return "", lockx.ErrNotHeld
	}
	return p, nil
}

// TTL implements lockx.Backend: the remaining lease of the owner's hold,
// after checking that its node exists.
func (b *Backend) TTL(ctx context.Context, key string, owner lockx.Owner) (time.Duration, error) {
	if err := checkKeyOwner(key, owner); err != nil {
		return 0, err
	}
	e := b.lockEntry(entryKey{nsLocks, key, owner}, "", false)
	if e == nil {
		return 0, lockx.ErrNotHeld
	}
	defer b.unlockEntry(e)
	if _, err := b.checkHeld(ctx, e, "ttl"); err != nil {
		return 0, err
	}
	b.mu.Lock()
	d := time.Until(e.deadline)
	b.mu.Unlock()
	if d <= 0 {
		return 0, lockx.ErrNotHeld
	}
	return d, nil
}

// Release implements lockx.Backend: it deletes the owner's node, which
// wakes the next waiter's watch. An owner this Backend knows nothing about
// (another process's, or a create whose reply was lost) is found by its
// name among the key's nodes, so an operator's force-release works from
// anywhere.
func (b *Backend) Release(ctx context.Context, key string, owner lockx.Owner) error {
	if err := checkKeyOwner(key, owner); err != nil {
		return err
	}
	dir := b.dirOf(nsLocks, key)
	if !b.isLive() {
		return lockx.Unavailable("release", ErrNoSession)
	}
	if err := ctx.Err(); err != nil {
		return lockx.Unavailable("release", err)
	}
	e := b.lockEntry(entryKey{nsLocks, key, owner}, dir, false)
	if e == nil {
		return b.releaseByName(dir, owner)
	}
	defer b.unlockEntry(e)
	b.mu.Lock()
	p, held := e.path, e.held
	b.mu.Unlock()
	if p == "" {
		err := b.releaseByName(dir, owner)
		b.mu.Lock()
		if err == nil || errors.Is(err, lockx.ErrNotHeld) {
			e.unknown = false
		}
		b.mu.Unlock()
		return err
	}
	err := b.conn.Delete(p, -1)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return lockx.Unavailable("release", err)
	}
	b.mu.Lock()
	e.held, e.path, e.unknown, e.loss = false, "", false, nil
	if e.timer != nil {
		e.timer.Stop()
	}
	b.unwatchLocked(e)
	b.mu.Unlock()
	if err != nil || !held {
		return lockx.ErrNotHeld
	}
	return nil
}

func (b *Backend) releaseByName(dir string, owner lockx.Owner) error {
	found, err := b.deleteOwnerNodes(dir, owner)
	if err != nil {
		return lockx.Unavailable("release", err)
	}
	if !found {
		return lockx.ErrNotHeld
	}
	return nil
}

// Watch implements lockx.Notifier. The channel receives a value when the
// owner's predecessor node goes (so only the next waiter wakes: no herd),
// when the session comes back after a disconnection, and when the owner's
// place in the queue was lost.
func (b *Backend) Watch(ctx context.Context, key string, owner lockx.Owner) (<-chan struct{}, func(), error) {
	if err := checkKeyOwner(key, owner); err != nil {
		return nil, nil, err
	}
	k := entryKey{nsLocks, key, owner}
	ch := make(chan struct{}, 1)
	b.mu.Lock()
	e := b.entries[k]
	if e == nil {
		e = &entry{k: k, dir: b.dirOf(nsLocks, key)}
		b.entries[k] = e
	}
	e.wakes = append(e.wakes, ch)
	b.mu.Unlock()
	var once sync.Once
	cancel := func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			for i, w := range e.wakes {
				if w == ch {
					e.wakes = append(e.wakes[:i], e.wakes[i+1:]...)
					break
				}
			}
			if len(e.wakes) == 0 && !e.held && !e.fair && e.path != "" && !b.closed {
				if at := time.Now().Add(cancelGrace); at.Before(e.deadline) {
					b.armLocked(e, at) // a plain waiter that stops waiting leaves the queue soon
				}
			}
			b.maybeDropLocked(e)
		})
	}
	return ch, cancel, nil
}

// NotifyLoss implements lockx.LossNotifier: fn runs when the Backend learns
// that owner's hold on key is gone — the session expired, the connection
// stayed down for a quarter of the session timeout, the lease ran out, or
// a renewal found the node deleted.
func (b *Backend) NotifyLoss(key string, owner lockx.Owner, fn func()) (stop func()) {
	b.mu.Lock()
	e := b.entries[entryKey{nsLocks, key, owner}]
	if e == nil || !e.held {
		b.mu.Unlock()
		b.goTracked(fn)
		return func() {}
	}
	r := &lossReg{fn: fn}
	if e.loss == nil {
		e.loss = make(map[*lossReg]struct{})
	}
	e.loss[r] = struct{}{}
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		delete(e.loss, r)
		b.mu.Unlock()
	}
}

var (
	_ lockx.Backend      = (*Backend)(nil)
	_ lockx.Notifier     = (*Backend)(nil)
	_ lockx.LossNotifier = (*Backend)(nil)
)
