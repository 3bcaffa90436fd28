package zklock

import (
	"context"
	"errors"
	"path"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// verdict is what a kind's grant rule says about one node in the queue.
type verdict struct {
	grant bool
	token int // index of the node whose czxid is the grant's token; -1: our own
	watch int // index of the node to watch when refused
	err   error
}

// decideFunc applies a kind's grant rule to the sorted nodes of a key, ours
// at idx; mine is our escaped owner.
type decideFunc func(nodes []node, idx int, mine string, req driver.Request) verdict

// decideExclusive is the mutex rule: the lowest node holds, each other
// watches the one before it.
func decideExclusive(nodes []node, idx int, mine string, req driver.Request) verdict {
	if idx == 0 {
		return verdict{grant: true, token: -1}
	}
	return verdict{watch: idx - 1}
}

var errQueueChurn = errors.New("zklock: the queue changed under every look")

// acquireQueued is one attempt on a queue-ordered kind (locks, read/write
// locks): find or create the owner's node, apply decide, and either grant
// or watch. A refused waiter keeps its node (its place in the queue).
func (b *Backend) acquireQueued(ctx context.Context, e *entry, decide decideFunc, req driver.Request) (driver.Result, error) {
	return b.acquireTagged(ctx, e, e.kind.tag, decide, req)
}

// acquireTagged is acquireQueued creating the node with tag.
func (b *Backend) acquireTagged(ctx context.Context, e *entry, tag string, decide decideFunc, req driver.Request) (driver.Result, error) {
	start, queueTTL, res, done, err := b.begin(ctx, e, req)
	if done {
		return res, err
	}
	b.mu.Lock()
	hadNode := e.path != ""
	if hadNode && !e.held && e.headGone {
		// The head we waited right behind was deleted: ours is the lowest
		// node now (sequence numbers only grow), no listing needed.
		e.headGone = false
		b.mu.Unlock()
		return b.grant(e, start, req.Lease, e.token), nil
	}
	if hadNode && !e.held && e.pred != "" && b.armed[e.pred] && e.fair == req.Fair {
		// The node we wait behind is still there (its watch has not fired),
		// and nothing else can move us up: refused without a round trip.
		// This is the Client's second attempt right after registering its
		// wake-up, and every timer-driven retry.
		b.armLocked(e, time.Now().Add(queueTTL))
		b.mu.Unlock()
		return driver.Result{}, nil
	}
	b.mu.Unlock()
	mine := escape(string(e.k.owner), false)
	for look := 0; look < 4; look++ {
		b.mu.Lock()
		p, unknown := e.path, e.unknown
		b.mu.Unlock()
		if p == "" && unknown {
			if _, err := b.adopt(e); err != nil {
				return driver.Result{}, driver.Unavailable("acquire", err)
			}
			b.mu.Lock()
			p = e.path
			b.mu.Unlock()
		}
		if p == "" {
			c, err := b.create(e.dir, e.k.owner, tag)
			if err != nil {
				b.createFailed(e, err, start.Add(max(req.Lease, queueTTL)))
				return driver.Result{}, driver.Unavailable("acquire", err)
			}
			b.mu.Lock()
			e.path, e.seq, e.token, e.unknown = c.path, c.seq, c.token, false
			b.mu.Unlock()
			if c.children == 1 { // ours is the only node: no listing needed
				return b.grant(e, start, req.Lease, c.token), nil
			}
			if tok, ok := tagToken(tag); ok { // a downgrade: granted wherever it queues
				return b.grant(e, start, req.Lease, tok), nil
			}
		}
		children, _, err := b.conn.Children(e.dir)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return driver.Result{}, driver.Unavailable("acquire", err)
		}
		nodes := sortedNodes(children)
		if e.kind.order != nil {
			nodes = e.kind.order(nodes)
		}
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
		v := decide(nodes, idx, mine, req)
		switch {
		case v.err != nil: // a verdict that leaves no trace
			if err := b.withdraw(e, queueTTL); err != nil {
				return driver.Result{}, err
			}
			return driver.Result{}, v.err
		case v.grant:
			tok := e.token
			if t, ok := tagToken(nodes[max(v.token, 0)].tag); ok && v.token >= 0 {
				tok = t // a downgraded reader's epoch: the write's token
			} else if v.token >= 0 && v.token != idx {
				ok, st, err := b.conn.Exists(e.dir + "/" + nodes[v.token].name)
				if err != nil {
					return driver.Result{}, driver.Unavailable("acquire", err)
				}
				if !ok {
					continue // the node whose token we share left: look again
				}
				tok = driver.Token(st.Czxid)
			}
			return b.grant(e, start, req.Lease, tok), nil
		case !req.Wait && !hadNode: // a try leaves no trace
			if err := b.withdraw(e, queueTTL); err != nil {
				return driver.Result{}, err
			}
			return driver.Result{}, nil
		}
		gone, err := b.watchNode(e, e.dir+"/"+nodes[v.watch].name)
		if err != nil {
			return driver.Result{}, driver.Unavailable("acquire", err)
		}
		if gone { // the watched node left between the listing and the watch
			continue
		}
		if e.kind == kindLock && v.watch == 0 && idx == 1 {
			b.mu.Lock()
			if e.pred == e.dir+"/"+nodes[0].name {
				e.headPred = true
			}
			b.mu.Unlock()
		}
		return b.refuse(e, req.Fair, queueTTL), nil
	}
	return driver.Result{}, driver.Unavailable("acquire", errQueueChurn)
}

// refuse records a waiter's refused attempt: its node stays queued until
// the queue TTL passes without another attempt.
func (b *Backend) refuse(e *entry, fair bool, queueTTL time.Duration) driver.Result {
	b.mu.Lock()
	defer b.mu.Unlock()
	e.fair = fair
	b.armLocked(e, time.Now().Add(queueTTL))
	return driver.Result{}
}

// begin starts an attempt: it fails fast without a session, and answers a
// holder's repeat (done). It returns the attempt's start and queue TTL.
func (b *Backend) begin(ctx context.Context, e *entry, req driver.Request) (start time.Time, queueTTL time.Duration, res driver.Result, done bool, err error) {
	if err := ctx.Err(); err != nil {
		return start, 0, res, true, driver.Unavailable("acquire", err)
	}
	if err := b.noSession(); err != nil {
		return start, 0, res, true, driver.Unavailable("acquire", err)
	}
	queueTTL = req.QueueTTL
	if queueTTL <= 0 {
		queueTTL = lockx.DefaultQueueTTL
	}
	start = time.Now()
	res, ok, err := b.reacquire(e, start, req.Lease)
	return start, queueTTL, res, ok || err != nil, err
}

// reacquire answers a holder's repeated attempt (a retry after a lost
// reply, or the watchdog's first renewal): same token, lease reset. ok is
// false when e is not held (or was found deleted, which ends the hold).
func (b *Backend) reacquire(e *entry, start time.Time, lease time.Duration) (driver.Result, bool, error) {
	b.mu.Lock()
	held, p := e.held, e.path
	b.mu.Unlock()
	if !held {
		return driver.Result{}, false, nil
	}
	ok, _, err := b.conn.Exists(p)
	if err != nil {
		return driver.Result{}, false, driver.Unavailable("acquire", err)
	}
	b.mu.Lock()
	if ok {
		b.armLocked(e, start.Add(lease))
		tok := e.token
		b.mu.Unlock()
		return driver.Result{Acquired: true, Token: tok, TTL: lease}, true, nil
	}
	fire := b.loseLocked(e, false) // deleted behind our back: start afresh
	b.mu.Unlock()
	runAll(fire)
	return driver.Result{}, false, nil
}

// createFailed records a create whose outcome is unknown, so the next
// attempt or Release looks for the node by name, and a timer removes it
// if neither comes.
func (b *Backend) createFailed(e *entry, err error, cleanup time.Time) {
	if definite(err) {
		return
	}
	b.mu.Lock()
	e.unknown = true
	b.armLocked(e, cleanup)
	b.mu.Unlock()
}

// withdraw deletes e's node after a refused try or a verdict.
func (b *Backend) withdraw(e *entry, queueTTL time.Duration) error {
	b.mu.Lock()
	p := e.path
	b.mu.Unlock()
	if err := b.conn.Delete(p, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
		b.mu.Lock()
		e.path, e.unknown = "", true
		b.armLocked(e, time.Now().Add(queueTTL))
		b.mu.Unlock()
		return driver.Unavailable("acquire", err)
	}
	b.mu.Lock()
	e.path = ""
	b.unwatchLocked(e)
	b.mu.Unlock()
	return nil
}

func (b *Backend) grant(e *entry, start time.Time, lease time.Duration, tok driver.Token) driver.Result {
	b.mu.Lock()
	defer b.mu.Unlock()
	e.held = true
	e.token = tok
	b.unwatchLocked(e)
	b.armLocked(e, start.Add(lease))
	return driver.Result{Acquired: true, Token: tok, TTL: lease}
}

type created struct {
	path     string
	seq      int64
	token    driver.Token
	children int32
	version  int32 // dir's data and child versions after the transaction
	cversion int32
	dirZxid  int64 // dir's czxid
}

// create makes owner's ephemeral sequential node under dir. The node and
// an empty write to dir go in one transaction, whose zxid — the node's
// czxid — comes back as dir's mzxid, together with dir's child count: so
// one round trip gives the fencing token and, when the node is alone, the
// grant. dir is a container node, created on demand and removed by the
// server once empty.
func (b *Backend) create(dir string, owner driver.Owner, tag string) (created, error) {
	prefix := dir + "/" + escape(string(owner), false) + "-"
	if tag != "" {
		prefix += tag + "-"
	}
	return b.multiCreate(dir, &zk.CreateRequest{Path: prefix, Acl: b.acl, Flags: zk.FlagEphemeralSequential},
		&zk.SetDataRequest{Path: dir, Version: -1})
}

// multiCreate runs create and set (on dir) as one transaction, making dir
// if it is missing.
func (b *Backend) multiCreate(dir string, ops ...any) (created, error) {
	for try := 0; ; try++ {
		res, err := b.conn.Multi(ops...)
		if errors.Is(err, zk.ErrNoNode) && try < 3 {
			if err := b.ensureDir(dir); err != nil {
				return created{}, err
			}
			continue
		}
		if err != nil {
			return created{}, err
		}
		var c created
		for _, r := range res {
			switch {
			case r.Stat != nil:
				c.token, c.children, c.version, c.cversion, c.dirZxid = driver.Token(r.Stat.Mzxid), r.Stat.NumChildren, r.Stat.Version, r.Stat.Cversion, r.Stat.Czxid
			case strings.HasPrefix(r.String, dir+"/"):
				n, ok := parseNode(path.Base(r.String))
				if !ok {
					return created{}, errors.New("zklock: unexpected node name " + r.String)
				}
				c.path, c.seq = r.String, n.seq
			}
		}
		if c.path == "" || c.token == 0 {
			return created{}, errors.New("zklock: malformed multi reply")
		}
		return c, nil
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
	for _, d := range []error{zk.ErrNoServer, zk.ErrSessionExpired, zk.ErrNodeExists, zk.ErrNoAuth, zk.ErrInvalidACL, zk.ErrBadArguments, zk.ErrNoChildrenForEphemerals, zk.ErrBadVersion} {
		if errors.Is(err, d) {
			return true
		}
	}
	return false
}

// adopt finds the node a create with a lost reply made (Curator's
// protected mode: the owner is in the name), makes it e's and returns it;
// it deletes any further node of the same owner and kind.
func (b *Backend) adopt(e *entry) (node, error) {
	children, _, err := b.conn.Children(e.dir)
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return node{}, err
	}
	mine := escape(string(e.k.owner), false)
	var found node
	for _, n := range sortedNodes(children) {
		if n.owner != mine || !e.kind.match(n.tag) {
			continue
		}
		if found.name == "" {
			found = n
		} else if err := b.conn.Delete(e.dir+"/"+n.name, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return node{}, err
		}
	}
	var tok driver.Token
	p := ""
	if found.name != "" {
		ok, st, err := b.conn.Exists(e.dir + "/" + found.name)
		if err != nil {
			return node{}, err
		}
		if ok {
			p, tok = e.dir+"/"+found.name, driver.Token(st.Czxid)
		} else {
			found = node{}
		}
	}
	b.mu.Lock()
	e.path, e.seq, e.token, e.unknown = p, found.seq, tok, false
	b.mu.Unlock()
	return found, nil
}

// deleteOwnerNodes deletes owner's nodes of kind k under dir and reports
// whether it found any.
func (b *Backend) deleteOwnerNodes(k *kind, dir string, owner driver.Owner) (bool, error) {
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
		if n.owner != mine || !k.match(n.tag) {
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

// watchNode registers e for the deletion of node p. It sets at most one
// ZooKeeper watch per node, however many local waiters share it. gone
// reports that p no longer exists.
func (b *Backend) watchNode(e *entry, p string) (gone bool, err error) {
	b.mu.Lock()
	b.watchLocked(e, p)
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
