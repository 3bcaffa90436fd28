package zklock

import (
	"errors"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/internal/backendkit"
)

// kind is one sort of hold: a plain lock, either side of a read/write lock,
// or semaphore permits. Each has its own directory under the root, and the
// tag in its nodes' names tells the sides apart.
type kind struct {
	ns  string // entry namespace
	dir string // directory under the root
	tag string // node-name tag ("" for plain locks, "R", "W"; semaphores use H<n>/Q<n>)
	// match reports whether a node tag belongs to this kind (for finding an
	// owner's nodes by name).
	match func(tag string) bool
	// order, if set, reorders the key's nodes (sorted by sequence) into
	// queue order.
	order func([]node) []node
}

var (
	kindLock  = &kind{ns: "lock", dir: "locks", tag: "", match: func(t string) bool { return t == "" }}
	kindRead  = &kind{ns: "read", dir: "rw", tag: "R", match: isReadTag, order: downgradesFirst}
	kindWrite = &kind{ns: "write", dir: "rw", tag: "W", match: func(t string) bool { return t == "W" }, order: downgradesFirst}
	kindSem   = &kind{ns: "sem", dir: "sem", match: func(t string) bool { return t != "" && (t[0] == 'H' || t[0] == 'Q') }}
)

type entryKey struct {
	ns    string
	key   string
	owner driver.Owner
}

// wake is one Watch registration. Watch registers by lockx key and owner:
// keys of every kind share the owner's wake-ups (Notifier's contract).
type wake = backendkit.Watcher[struct{}]

// entry is what the Backend knows about one owner's node for one key of
// one kind: the node it holds or waits with, its lease or queue deadline,
// its loss callbacks.
type entry struct {
	k    entryKey
	kind *kind
	dir  string
	op   sync.Mutex // serialises the calls for (kind, key, owner) that talk to the server

	// guarded by Backend.mu
	busy     int    // calls holding or waiting for op; the entry stays while > 0
	removed  bool   // left the map; a caller that finds it so looks again
	path     string // our node, "" if none
	seq      int64
	token    driver.Token
	held     bool
	unknown  bool // a create's reply was lost: our node may exist, name unknown
	fair     bool
	deadline time.Time // lease end (held) or queue deadline (waiting)
	timer    backendkit.Lease
	pred     string            // the node (or, for semaphores, directory) watched for us
	headPred bool              // pred was the lowest node and ours the next (plain locks)
	headGone bool              // and pred has been deleted since: we are the lowest
	count    int64             // semaphore waiter: permits asked for
	limit    int64             // and the limit asked with
	loss     backendkit.Losses // NotifyLoss callbacks, guarded by b.mu
}

func (b *Backend) dirOf(k *kind, key string) string {
	return b.root + "/" + k.dir + "/" + escape(key, true)
}

func checkKeyOwner(key string, owner driver.Owner) error {
	if key == "" {
		return &driver.ArgError{Arg: "key", Reason: "empty"}
	}
	if owner == "" {
		return &driver.ArgError{Arg: "owner", Reason: "empty"}
	}
	return nil
}

// lockEntry returns the entry of (k, key, owner) with its op lock held,
// making it if create is set (else nil when there is none).
func (b *Backend) lockEntry(k *kind, key string, owner driver.Owner, create bool) *entry {
	ek := entryKey{k.ns, key, owner}
	for {
		b.mu.Lock()
		e := b.entries[ek]
		if e == nil {
			if !create {
				b.mu.Unlock()
				return nil
			}
			e = &entry{k: ek, kind: k, dir: b.dirOf(k, key)}
			b.entries[ek] = e
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
	if e.removed || e.busy > 0 || e.held || e.path != "" || e.unknown {
		return
	}
	e.timer.Stop()
	b.unwatchLocked(e)
	e.removed = true
	if b.entries[e.k] == e {
		delete(b.entries, e.k)
	}
}

// wakesLocked returns the Watch registrations of e's owner and key.
func (b *Backend) wakesLocked(e *entry) []*wake {
	var ws []*wake
	b.wakes.Owned(e.k.key, e.k.owner, func(w *wake) { ws = append(ws, w) })
	return ws
}

// armLocked sets e's deadline (lease or queue) and its timer.
func (b *Backend) armLocked(e *entry, deadline time.Time) {
	e.deadline = deadline
	e.timer.Arm(time.Until(deadline), func() { b.expire(e) })
}

// loseLocked ends a hold the owner no longer has. With orphan its node is
// deleted once the session is back. It returns the loss callbacks to run
// after b.mu is released.
func (b *Backend) loseLocked(e *entry, orphan bool) []func() {
	if orphan && e.path != "" {
		b.orphans = append(b.orphans, e.path)
	}
	e.held, e.path, e.unknown, e.headGone = false, "", false, false
	e.timer.Stop()
	fns := e.loss.Take()
	b.maybeDropLocked(e)
	return fns
}

// watchLocked registers e for the next event on path p.
func (b *Backend) watchLocked(e *entry, p string) {
	if e.pred == p {
		return
	}
	e.headPred, e.headGone = false, false
	b.unwatchLocked(e)
	set := b.watched[p]
	if set == nil {
		set = make(map[*entry]struct{})
		b.watched[p] = set
	}
	set[e] = struct{}{}
	e.pred = p
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
// unknown. It deletes the node, so the next waiter gets its turn.
func (b *Backend) expire(e *entry) {
	b.mu.Lock()
	if b.closed || e.removed {
		b.mu.Unlock()
		return
	}
	if !b.g.Enter() {
		b.mu.Unlock()
		return
	}
	e.busy++
	b.mu.Unlock()
	defer b.g.Exit()
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
		_, _ = b.deleteOwnerNodes(e.kind, e.dir, e.k.owner)
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
		for _, w := range b.wakesLocked(e) { // a live waiter queues again
			fire = append(fire, w.Wake)
		}
	}
	b.mu.Unlock()
	runAll(fire)
}
