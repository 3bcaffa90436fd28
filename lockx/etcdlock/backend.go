package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/internal/backendkit"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Backend is a lockx.Backend over an etcd cluster. It is safe for
// concurrent use; create one per process (or per lockx.Client) with New.
type Backend struct {
	cli *clientv3.Client
	cfg config

	g backendkit.Group // background goroutines; its context ends at Close: watches, background calls

	mu      sync.Mutex
	closed  bool
	pool    map[int64][]lease    // spare leases by TTL (leases.go)
	hot     map[string]time.Time // directories with a recent refusal
	held    map[ref]*held
	queued  map[ref]*queued
	waiters backendkit.Registry[string, *armed] // Watch registrations by key
}

// Interface checks.
var (
	_ driver.Backend          = (*Backend)(nil)
	_ driver.Notifier         = (*Backend)(nil)
	_ driver.BatchExtender    = (*Backend)(nil)
	_ driver.LossNotifier     = (*Backend)(nil)
	_ driver.FenceStore       = (*Backend)(nil)
	_ driver.Inspector        = (*Backend)(nil)
	_ driver.RWBackend        = (*Backend)(nil)
	_ driver.SemaphoreBackend = (*Backend)(nil)
)

// New returns a Backend that keeps its locks in the cluster cli talks to.
// Close the Backend (or the lockx.Client over it) when done; cli stays
// open, it is the caller's.
func New(cli *clientv3.Client, opts ...Option) *Backend {
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cli == nil && cfg.err == nil {
		cfg.err = &driver.ArgError{Arg: "etcd client", Reason: "nil"}
	}
	return &Backend{
		cli: cli, cfg: cfg,
		held: make(map[ref]*held), pool: make(map[int64][]lease), hot: make(map[string]time.Time), queued: make(map[ref]*queued),
	}
}

// Close stops the backend's watches and background calls and waits for
// them. Locks still held keep their leases until they run out (the
// lockx.Client releases its locks before it closes the backend).
func (b *Backend) Close() error {
	var ws []*waiter
	var spares []clientv3.LeaseID
	if !b.g.Shut(&b.mu, func() {
		b.closed = true
		for _, h := range b.held {
			h.timer.Stop()
		}
		for _, q := range b.queued {
			q.timer.Stop()
		}
		b.waiters.All(func(w *waiter) { ws = append(ws, w) })
		for _, ls := range b.pool {
			for _, l := range ls {
				spares = append(spares, l.id)
			}
		}
		for _, q := range b.queued { // waiters of a closing backend wait no more
			spares = append(spares, q.lease.id)
		}
		b.pool = nil
	}) {
		return nil
	}
	for _, w := range ws {
		w.X.stop()
	}
	// Spare leases carry no keys; revoke them rather than leave them to
	// run out, best effort and briefly.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, id := range spares {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = b.cli.Revoke(ctx, id)
		}()
	}
	wg.Wait()
	b.g.Close()
	return nil
}

// hotFor is how long a refusal marks a directory as contended: attempts
// on it read before they write, since a put-if-empty would most likely be
// a write wasted.
const hotFor = time.Second

func (b *Backend) markHot(dir string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.hot) > 10000 { // forget old marks rather than grow
		now := time.Now()
		for d, t := range b.hot {
			if now.Sub(t) > hotFor {
				delete(b.hot, d)
			}
		}
	}
	b.hot[dir] = time.Now()
}

func (b *Backend) isHot(dir string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.hot[dir]
	if ok && time.Since(t) > hotFor {
		delete(b.hot, dir)
		return false
	}
	return ok
}

// kinds of entries: each has its own namespace of keys.
const (
	kindLock = "l"
	kindRW   = "rw"
	kindSem  = "s"
)

// ref names one entry: a lock, a read or write hold, or a permit hold of
// one owner.
type ref struct {
	kind string
	key  string
	name string // the owner, or the mode letter and the owner (rw)
}

// dir is the directory of all entries of a key:
// <prefix><kind><len(key)>:<key>/ — the length makes keys that are
// prefixes of each other ("a", "a/b") land in disjoint directories.
func (b *Backend) dir(kind, key string) string {
	return b.cfg.prefix + kind + strconv.Itoa(len(key)) + ":" + key + "/"
}

// Holders live under <dir>h/<name>, queued waiters under <dir>q/<name>.
func (b *Backend) hkey(r ref) string { return b.dir(r.kind, r.key) + "h/" + r.name }
func (b *Backend) qkey(r ref) string { return b.dir(r.kind, r.key) + "q/" + r.name }

// held is a grant this backend made: the entry key created at rev (the
// fencing token) on its own lease.
type held struct {
	key      string // the entry: <dir>h/<name>, or <dir>q/<name> for a queue head granted in place
	rev      int64
	lease    lease
	value    string
	deadline time.Time        // local: when the lease the caller asked for ends
	timer    backendkit.Lease // revokes the lease at deadline unless renewed
}

// queued is a queue entry <dir>q/<name> this backend wrote for a waiter.
type queued struct {
	rev     int64
	lease   lease
	ttl     time.Duration    // the queue TTL the waiter asked for
	touched time.Time        // the waiter's last attempt
	timer   backendkit.Lease // withdraws the entry ttl after the last refresh
}

// entry is one key of a directory as read.
type entry struct {
	name  string
	value string
	rev   int64 // create revision
	lease clientv3.LeaseID
}

// view is a directory read at one revision: holders and queue, each in
// order of creation.
type view struct {
	rev     int64
	holders []entry
	queue   []entry
}

func (v *view) holder(name string) *entry {
	for i := range v.holders {
		if v.holders[i].name == name {
			return &v.holders[i]
		}
	}
	return nil
}

func (b *Backend) parseView(dir string, rev int64, kvs []*mvccpb.KeyValue) view {
	v := view{rev: rev}
	for _, kv := range kvs {
		rest, ok := strings.CutPrefix(string(kv.Key), dir)
		if !ok || len(rest) < 2 {
			continue
		}
		e := entry{name: rest[2:], value: string(kv.Value), rev: kv.CreateRevision, lease: clientv3.LeaseID(kv.Lease)}
		switch rest[:2] {
		case "h/":
			v.holders = append(v.holders, e)
		case "q/":
			v.queue = append(v.queue, e)
		}
	}
	return v
}

// readOp reads a whole directory, oldest entry first.
func readOp(dir string) clientv3.Op {
	return clientv3.OpGet(dir, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
}

func (b *Backend) read(ctx context.Context, dir string) (view, error) {
	resp, err := b.cli.Get(ctx, dir, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return view{}, err
	}
	return b.parseView(dir, resp.Header.Revision, resp.Kvs), nil
}

// secs is the etcd lease TTL (whole seconds, rounded up) for d.
func secs(d time.Duration) int64 {
	s := int64((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return s
}

// revokeLater revokes a lease nobody needs any more (a refused attempt's,
// a moved entry's old one) without making the caller wait. If it fails,
// the lease runs out on its own.
func (b *Backend) revokeLater(id clientv3.LeaseID) {
	if id == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.g.Go(func() {
		ctx, cancel := context.WithTimeout(b.g.Context(), b.cfg.opTimeout)
		defer cancel()
		_, _ = b.cli.Revoke(ctx, id)
	})
}

// errLeaseGone reports a spare lease that ran out while an entry was put
// on it.
var errLeaseGone = errors.New("etcdlock: lease ran out during the request")

// notFound reports etcd's "lease not found": the lease expired or was
// revoked, so every key on it is gone.
func notFound(err error) bool {
	return errors.Is(err, rpctypes.ErrLeaseNotFound)
}

// token converts a create revision to a fencing token.
func token(rev int64) (driver.Token, error) {
	if rev <= 0 || driver.Token(rev) > driver.MaxToken {
		return 0, fmt.Errorf("etcdlock: revision %d is not a valid fencing token", rev)
	}
	return driver.Token(rev), nil
}

// timed is an entry record whose expiry timer must stop when the record
// is forgotten.
type timed interface {
	comparable
	stop()
}

func (h *held) stop()   { h.timer.Stop() }
func (q *queued) stop() { q.timer.Stop() }

func get[T timed](b *Backend, m map[ref]T, r ref) T {
	b.mu.Lock()
	defer b.mu.Unlock()
	return m[r]
}

// take forgets r's record and returns it.
func take[T timed](b *Backend, m map[ref]T, r ref) T {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := m[r]
	if ok {
		delete(m, r)
		v.stop()
	}
	return v
}

// drop forgets v if it is still r's record.
func drop[T timed](b *Backend, m map[ref]T, r ref, v T) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if m[r] == v {
		delete(m, r)
		v.stop()
	}
}

func (b *Backend) getHeld(r ref) *held         { return get(b, b.held, r) }
func (b *Backend) takeHeld(r ref) *held        { return take(b, b.held, r) }
func (b *Backend) dropHeld(r ref, h *held)     { drop(b, b.held, r, h) }
func (b *Backend) getQueued(r ref) *queued     { return get(b, b.queued, r) }
func (b *Backend) takeQueued(r ref) *queued    { return take(b, b.queued, r) }
func (b *Backend) dropQueued(r ref, q *queued) { drop(b, b.queued, r, q) }

// addHeld records a grant and arms its expiry: a lock whose lease the
// caller lets lapse is freed at its deadline by this process, to the
// millisecond, instead of at etcd's next whole-second lease expiry (which
// still frees it if this process is gone).
func (b *Backend) addHeld(r ref, h *held) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if old := b.held[r]; old != nil && old != h {
		old.timer.Stop()
	}
	b.held[r] = h
	h.timer.Arm(time.Until(h.deadline), func() { b.expireHeld(r, h) })
}

func (b *Backend) expireHeld(r ref, h *held) {
	b.mu.Lock()
	if b.held[r] != h {
		b.mu.Unlock()
		return
	}
	if !h.timer.Expired(h.deadline) { // renewed meanwhile
		b.mu.Unlock()
		return
	}
	delete(b.held, r)
	id := h.lease.id
	b.mu.Unlock()
	b.revokeLater(id)
}

// setDeadline moves h's local deadline after a renewal.
func (b *Backend) setDeadline(h *held, d time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h.deadline = d
	h.timer.Reset(time.Until(d))
}

// addQueued records a queue entry and arms its withdrawal: a waiter that
// stops refreshing (it crashed, or forgot) leaves the queue after its queue
// TTL; etcd removes the entry of a dead process when its lease runs out.
func (b *Backend) addQueued(r ref, q *queued) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if old := b.queued[r]; old != nil && old != q {
		old.timer.Stop()
	}
	b.queued[r] = q
	q.touched = time.Now()
	q.timer.Arm(q.ttl, func() {
		b.mu.Lock()
		if b.queued[r] != q {
			b.mu.Unlock()
			return
		}
		delete(b.queued, r)
		b.mu.Unlock()
		b.revokeLater(q.lease.id)
	})
}

// refreshed records a keep-alive of q's lease sent at sent (if not zero)
// and restarts its withdrawal timer: the waiter is alive.
func (b *Backend) refreshed(q *queued, sent time.Time, ttl int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ttl > 0 {
		q.lease.ttl = ttl
	}
	if q.lease.ttl > 0 && !sent.IsZero() {
		q.lease.until = sent.Add(time.Duration(q.lease.ttl) * time.Second)
	}
	q.touched = time.Now()
	q.timer.Reset(q.ttl)
}

// refreshDue reports whether q's lease has used up a third of its TTL (or
// is of unknown age), so that the attempt renews it.
func (b *Backend) refreshDue(q *queued) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return q.lease.ttl == 0 || time.Until(q.lease.until) < time.Duration(q.lease.ttl)*time.Second*2/3
}
