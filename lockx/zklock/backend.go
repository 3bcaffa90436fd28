package zklock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/internal/backendkit"
)

// ErrNoSession reports a call made while the Backend has no live ZooKeeper
// session (disconnected: Curator's SUSPENDED, or between an expiry and the
// next session). It matches lockx.ErrUnavailable. After Close, calls fail
// with an error matching lockx.ErrClosed instead.
var ErrNoSession = errors.New("zklock: no zookeeper session")

// Backend is a lockx.Backend on ZooKeeper. It implements lockx.Notifier and
// lockx.LossNotifier too. Make one with Dial; it owns its ZooKeeper
// connection and session, and Close ends both.
type Backend struct {
	conn   *zk.Conn
	ready  chan struct{} // closed once conn is set; events wait for it
	root   string
	acl    []zk.ACL
	logger *slog.Logger

	mu        sync.Mutex
	entries   map[entryKey]*entry
	wakes     backendkit.Registry[string, struct{}] // Watch registrations by lockx key
	watched   map[string]map[*entry]struct{}        // watched path → entries waiting on it
	armed     map[string]bool                       // paths with a ZooKeeper watch set
	session   int64                                 // id of the session the entries belong to
	connected bool                                  // that session is connected now
	live      bool                                  // and calls may use it (see settle)
	gen       int                                   // counts connection state changes
	settle    *time.Timer                           // makes a reconnected session live
	timeout   time.Duration                         // negotiated session timeout
	suspend   *time.Timer                           // declares holds lost after a long disconnection
	suspended bool                                  // suspend fired: holds were declared lost
	orphans   []string                              // nodes of holds declared lost, to delete once reconnected
	sems      map[string]*semDir                    // semaphore directories in use (semaphore.go)
	closed    bool
	g         backendkit.Group // timer callbacks and clean-ups in flight
}

// Dial connects to the ZooKeeper ensemble servers ("host:port") and waits,
// up to WithConnectTimeout or ctx, for a session.
func Dial(ctx context.Context, servers []string, opts ...Option) (*Backend, error) {
	cfg := defaults()
	for _, o := range opts {
		if o == nil {
			return nil, &driver.ArgError{Arg: "option", Reason: "nil Option"}
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if len(servers) == 0 {
		return nil, &driver.ArgError{Arg: "servers", Reason: "no ZooKeeper server given"}
	}
	b := &Backend{
		ready:   make(chan struct{}),
		root:    cfg.root,
		acl:     cfg.acl,
		logger:  cfg.logger,
		entries: make(map[entryKey]*entry),
		watched: make(map[string]map[*entry]struct{}),
		armed:   make(map[string]bool),
		sems:    make(map[string]*semDir),
		timeout: cfg.sessionTimeout,
	}
	user := cfg.connOpts
	conn, _, err := zk.Connect(servers, cfg.sessionTimeout,
		func(c *zk.Conn) {
			for _, o := range user {
				o(c)
			}
		},
		zk.WithLogger(zkLogger{b}), zk.WithLogInfo(true), zk.WithEventCallback(b.onEvent))
	if err != nil {
		return nil, driver.Unavailable("dial", err)
	}
	b.conn = conn
	close(b.ready)
	wctx, cancel := context.WithTimeout(ctx, cfg.connectTimeout)
	defer cancel()
	for b.noSession() != nil {
		select {
		case <-wctx.Done():
			conn.Close()
			return nil, driver.Unavailable("dial", fmt.Errorf("no session with %v: %w", servers, context.Cause(wctx)))
		case <-time.After(5 * time.Millisecond):
		}
	}
	for _, dir := range []string{kindLock.dir, kindRead.dir, kindSem.dir} {
		if err := b.ensurePath(b.root + "/" + dir); err != nil {
			b.Close()
			return nil, err
		}
	}
	return b, nil
}

// Close ends the Backend's session, which makes ZooKeeper delete every node
// it holds or waits with at once. It does not wait for the session's
// locks to be released by the Client: close Clients first.
func (b *Backend) Close() error {
	if !b.g.Shut(&b.mu, func() {
		b.closed = true
		if b.suspend != nil {
			b.suspend.Stop()
		}
		if b.settle != nil {
			b.settle.Stop()
		}
		for _, e := range b.entries {
			e.timer.Stop()
		}
	}) {
		return nil
	}
	b.g.Wait()
	b.conn.Close()
	return nil
}

// SessionTimeout returns the session timeout the server granted (or the one
// asked for, before the first session).
func (b *Backend) SessionTimeout() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.timeout
}

// SessionID returns the id of the current ZooKeeper session (0 without one).
func (b *Backend) SessionID() int64 { return b.conn.SessionID() }

// errClosed is the cause of every call after Close.
var errClosed = fmt.Errorf("zklock: backend closed: %w", driver.ErrClosed)

// noSession returns nil while the Backend has a live session, errClosed
// after Close and ErrNoSession otherwise.
func (b *Backend) noSession() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.noSessionLocked()
}

// noSessionLocked is noSession for callers that hold b.mu.
func (b *Backend) noSessionLocked() error {
	switch {
	case b.closed:
		return errClosed
	case !b.live:
		return ErrNoSession
	}
	return nil
}

// ensurePath creates path and its missing parents as persistent znodes.
func (b *Backend) ensurePath(path string) error {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	p := ""
	for _, part := range parts {
		p += "/" + part
		if _, err := b.conn.Create(p, nil, zk.FlagPersistent, b.acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return driver.Unavailable("create "+p, err)
		}
	}
	return nil
}

// onEvent receives every session and watch event of the connection, on the
// client's receive goroutine: it must not block or call the server.
func (b *Backend) onEvent(ev zk.Event) {
	<-b.ready
	switch ev.Type {
	case zk.EventSession:
		switch ev.State {
		case zk.StateHasSession:
			b.onSession()
		case zk.StateDisconnected:
			b.onDisconnect()
		case zk.StateExpired:
			b.onExpired()
		}
		b.debug("zklock: session state", "state", ev.State.String(), "server", ev.Server)
	case zk.EventNodeDeleted:
		b.onNodeEvent(ev.Path, true)
	case zk.EventNodeChildrenChanged:
		b.onChildren(ev.Path)
	case zk.EventNodeDataChanged, zk.EventNodeCreated, zk.EventNotWatching:
		b.onNode(ev.Path)
	}
}

func (b *Backend) onSession() {
	id := b.conn.SessionID()
	var fire []func()
	b.mu.Lock()
	first := b.session == 0
	if !first && b.session != id {
		fire = b.dropAllLocked(false) // the old session ended: its nodes are gone
	}
	b.session = id
	b.connected = true
	b.gen++
	if b.suspend != nil {
		b.suspend.Stop()
		b.suspend = nil
	}
	b.suspended = false
	if first {
		b.mu.Unlock()
		runAll(fire)
		b.goLive(b.gen)
		return
	}
	// After a reconnection go-zookeeper re-registers its watches from its
	// own goroutine while its receive loop already runs, and the two touch
	// the client's last zxid without synchronisation (go-zookeeper/zk
	// PR #35, samuel/go-zookeeper #260: a data race the race detector
	// reports whenever a reply arrives meanwhile). Calls wait a moment
	// before they use a reconnected session, so no reply can arrive then.
	gen := b.gen
	if b.settle != nil {
		b.settle.Stop()
	}
	b.settle = time.AfterFunc(reconnectSettle, func() { b.goLive(gen) })
	b.mu.Unlock()
	runAll(fire)
}

// reconnectSettle is how long a reconnected session waits before calls use
// it (see onSession).
const reconnectSettle = 100 * time.Millisecond

// goLive lets calls use the session of connection generation gen, wakes
// every waiter to look again, and deletes the nodes of holds declared lost
// while disconnected.
func (b *Backend) goLive(gen int) {
	b.mu.Lock()
	if b.gen != gen || !b.connected || b.closed {
		b.mu.Unlock()
		return
	}
	b.live = true
	orphans := b.orphans
	b.orphans = nil
	wakes := b.wakeAllLocked()
	b.mu.Unlock()
	for _, w := range wakes {
		w.Wake()
	}
	if len(orphans) > 0 {
		b.g.Go(func() {
			for _, p := range orphans {
				_ = b.conn.Delete(p, -1)
			}
		})
	}
}

// onDisconnect starts the suspension: until a reconnection with the same
// session, calls fail with ErrNoSession, and once a quarter of the session
// timeout has passed every hold is declared lost, because the server may
// have expired the session by then (see the package documentation).
func (b *Backend) onDisconnect() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.connected || b.closed {
		return
	}
	b.connected, b.live = false, false
	b.gen++
	b.suspend = time.AfterFunc(b.timeout/4, b.onSuspendTimeout)
}

func (b *Backend) onSuspendTimeout() {
	b.mu.Lock()
	if b.connected || b.closed || b.suspended {
		b.mu.Unlock()
		return
	}
	b.suspended = true
	var fire []func()
	for _, e := range b.entries {
		if e.held {
			fire = append(fire, b.loseLocked(e, true)...)
		}
	}
	timeout := b.timeout
	b.mu.Unlock()
	b.warn("zklock: disconnected for a quarter of the session timeout: locks declared lost", "timeout", timeout)
	runAll(fire)
}

func (b *Backend) onExpired() {
	b.mu.Lock()
	b.connected, b.live = false, false
	b.gen++
	if b.suspend != nil {
		b.suspend.Stop()
		b.suspend = nil
	}
	fire := b.dropAllLocked(true)
	b.session = 0
	b.mu.Unlock()
	b.warn("zklock: session expired: every lock of this backend is lost")
	runAll(fire)
}

// dropAllLocked forgets the nodes of a session that ended: holds are lost,
// waiters lose their place and are woken to queue again.
func (b *Backend) dropAllLocked(wake bool) []func() {
	var fire []func()
	for _, e := range b.entries {
		if e.held {
			fire = append(fire, b.loseLocked(e, false)...)
		} else if !e.held {
			e.path, e.unknown = "", false
			b.unwatchLocked(e)
		}
		if wake {
			for _, w := range b.wakesLocked(e) {
				fire = append(fire, w.Wake)
			}
		}
	}
	b.orphans = nil
	b.armed = make(map[string]bool)
	b.watched = make(map[string]map[*entry]struct{})
	return fire
}

func (b *Backend) wakeAllLocked() []*wake {
	var ws []*wake
	b.wakes.All(func(w *wake) { ws = append(ws, w) })
	return ws
}

// onNode wakes the waiters of a watched path that changed (or whose watch
// ended): they look again.
func (b *Backend) onNode(path string) { b.onNodeEvent(path, false) }

// onNodeEvent is onNode; deleted reports the path's deletion, which makes
// a plain waiter right behind the deleted head the lowest node.
func (b *Backend) onNodeEvent(path string, deleted bool) {
	b.mu.Lock()
	delete(b.armed, path)
	var ws []*wake
	for e := range b.watched[path] {
		e.pred = ""
		e.headGone = deleted && e.headPred
		ws = append(ws, b.wakesLocked(e)...)
	}
	delete(b.watched, path)
	b.mu.Unlock()
	for _, w := range ws {
		w.Wake()
	}
}

// onChildren handles a change among a semaphore's nodes. Only a prefix of
// the queue can be granted, so it wakes this Backend's waiters in queue
// order while their permits fit in the largest limit they asked with,
// plus every non-fair waiter; the others stay registered for the next
// change (the woken ones set the watch again with their listing).
func (b *Backend) onChildren(path string) {
	b.mu.Lock()
	delete(b.armed, path)
	set := b.watched[path]
	waiting := make([]*entry, 0, len(set))
	var limit int64
	for e := range set {
		waiting = append(waiting, e)
		limit = max(limit, e.limit)
	}
	sort.Slice(waiting, func(i, j int) bool { return waiting[i].seq < waiting[j].seq })
	var ws []*wake
	var sum int64
	for i, e := range waiting {
		fits := sum+e.count <= limit
		if e.fair {
			sum += e.count
		}
		if i > 0 && !fits && e.fair {
			continue
		}
		delete(set, e)
		e.pred = ""
		ws = append(ws, b.wakesLocked(e)...)
	}
	if len(set) == 0 {
		delete(b.watched, path)
	}
	b.mu.Unlock()
	for _, w := range ws {
		w.Wake()
	}
}

func runAll(fns []func()) {
	for _, f := range fns {
		f()
	}
}

func (b *Backend) debug(msg string, args ...any) {
	if b.logger != nil {
		b.logger.Debug(msg, args...)
	}
}

func (b *Backend) warn(msg string, args ...any) {
	if b.logger != nil {
		b.logger.Warn(msg, args...)
	}
}

// zkLogger routes go-zookeeper's messages to the Backend's logger and reads
// the negotiated session timeout from the one that announces a session
// ("authenticated: id=…, timeout=…"): the client has no getter for it.
type zkLogger struct{ b *Backend }

func (l zkLogger) Printf(format string, args ...any) {
	if strings.HasPrefix(format, "authenticated:") && len(args) == 2 {
		if ms, ok := args[1].(int32); ok && ms > 0 {
			l.b.mu.Lock()
			l.b.timeout = time.Duration(ms) * time.Millisecond
			l.b.mu.Unlock()
		}
	}
	l.b.debug("zklock: zookeeper client: " + fmt.Sprintf(format, args...))
}
