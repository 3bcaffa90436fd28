package redislock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/redis/go-redis/v9"
)

// Quorum is a Redlock backend: one lock over N independent Redis nodes,
// granted only when a majority (N/2+1) of them granted it within the lease.
// It implements driver.Backend, driver.Notifier, driver.BatchExtender and
// driver.Inspector (quorum_inspect.go).
//
// Each node is served by an ordinary single-node Backend (the same scripts,
// tokens, tombstones, fair queues and wake-up channels); Quorum adds the
// majority logic on top:
//
//   - Acquire sends one attempt to every node at once, each bounded by the
//     node timeout (WithNodeTimeout, default 50 ms, never more than the
//     lease). It succeeds only if a majority granted and the elapsed time is
//     below the lease; the reported Result.TTL is the validity
//     lease − elapsed − drift (drift: WithQuorumDrift, default lease·0.01 +
//     2 ms), so the Client's local expiry timer is correct. The fencing
//     token is the largest token among the granting nodes.
//   - A failed attempt releases the key only on the nodes that granted it or
//     did not answer (unknown outcome); nodes that refused get nothing more.
//     A refused attempt therefore costs exactly one script call per node
//     (redsync sends a release script to every node on every failed try).
//   - Extend succeeds only if a majority renewed within the lease; Release
//     and Close go to every node.
//   - Watch subscribes on every node and wakes the waiter on the first
//     notification from any of them; repeated notifications of one release
//     collapse into one wake-up, so N nodes do not mean N retries.
//
// Fencing tokens are monotonic as long as a majority of the nodes keep their
// state and the nodes' clocks agree; see docs/backends.md ("Redlock") for
// exactly when a token can go backwards and why the resource-side check
// (FencedSet, driver.FenceStore) must still be used.
//
// An even N is allowed but buys nothing: 4 nodes need 3 grants and survive
// one failure, like 3 nodes. Two clients that point at the same server
// would let one server count twice; NewQuorum refuses identical client
// values and identical addresses, and the first call probes every node's
// run_id (INFO server) and refuses the backend if two nodes are the same
// process.
type Quorum struct {
	nodes  []*quorumNode
	quorum int
	cfg    quorumConfig
	prefix string

	errMu sync.Mutex
	err   error

	verified atomic.Bool // every node's run_id seen, no duplicates

	// Late answers (after a call's node timeout) by key and owner. A late
	// grant is released unless a newer attempt of the same owner has started
	// since (which then owns the outcome on that node); a newer attempt
	// skips the nodes where such a release is under way (counting them as
	// failed), so that a late release of an earlier attempt cannot take
	// away a grant the new attempt counted, and nobody waits for it.
	lmu  sync.Mutex
	late map[lateKey]*lateState

	yields yields // fair waiters keeping their place (quorum_yield.go)
}

type lateKey struct {
	key   string
	owner driver.Owner
}

type lateState struct {
	gen      uint64 // attempts started since the entry was made
	pending  int    // late answers still to come
	inflight int    // late releases under way, in all
	busy     []int  // late releases under way, per node
}

// beginAttempt supersedes the late answers of earlier attempts of owner on
// key and returns the nodes where their releases are under way (nil if
// none), which the attempt must skip.
func (q *Quorum) beginAttempt(key string, owner driver.Owner) []bool {
	q.lmu.Lock()
	defer q.lmu.Unlock()
	e := q.late[lateKey{key, owner}]
	if e == nil {
		return nil
	}
	e.gen++
	var skip []bool
	for i, n := range e.busy {
		if n > 0 {
			if skip == nil {
				skip = make([]bool, len(q.nodes))
			}
			skip[i] = true
		}
	}
	return skip
}

// expectLate registers n late answers of the attempt that just ended and
// returns the function each of them calls: it releases node nd if release
// says so and no newer attempt has started.
func (q *Quorum) expectLate(key string, owner driver.Owner, n int) func(i int, release bool) {
	k := lateKey{key, owner}
	q.lmu.Lock()
	if q.late == nil {
		q.late = make(map[lateKey]*lateState)
	}
	e := q.late[k]
	if e == nil {
		e = &lateState{}
		q.late[k] = e
	}
	e.pending += n
	gen := e.gen
	q.lmu.Unlock()
	return func(i int, release bool) {
		q.lmu.Lock()
		e.pending--
		release = release && e.gen == gen
		if release {
			if e.busy == nil {
				e.busy = make([]int, len(q.nodes))
			}
			e.busy[i]++
			e.inflight++
		}
		q.lmu.Unlock()
		if release {
			q.releaseNode(q.nodes[i], key, owner)
		}
		q.lmu.Lock()
		if release {
			e.busy[i]--
			e.inflight--
		}
		if e.pending == 0 && e.inflight == 0 && q.late[k] == e {
			delete(q.late, k)
		}
		q.lmu.Unlock()
	}
}

// notSent reports an error that proves the command never reached the
// server (no connection could be made), so it cannot have granted anything.
func notSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrClosed) || err == errReleasing
}

// errReleasing: the node was skipped because a release of an earlier
// attempt's late grant is under way there.
var errReleasing = errors.New("redislock: node skipped: a late grant of an earlier attempt is being released")

type quorumNode struct {
	b     *Backend
	rdb   redis.UniversalClient
	runID atomic.Pointer[string]
}

var (
	_ driver.Backend       = (*Quorum)(nil)
	_ driver.Notifier      = (*Quorum)(nil)
	_ driver.BatchExtender = (*Quorum)(nil)
)

// Defaults of a Quorum.
const (
	// DefaultNodeTimeout bounds one node's answer to one call.
	DefaultNodeTimeout = 50 * time.Millisecond
	// DefaultDriftFactor and DefaultDriftFixed make the clock drift
	// allowance lease·0.01 + 2 ms, Redlock's.
	DefaultDriftFactor = 0.01
	DefaultDriftFixed  = 2 * time.Millisecond
)

// QuorumOption configures a Quorum. Every Option (WithPrefix, WithTombstone,
// WithQueueTTL, WithAutoPipeline, …) is a QuorumOption too and applies to
// each node's Backend; WithNodeTimeout and WithQuorumDrift are Quorum's own.
type QuorumOption interface{ applyQuorum(*quorumConfig) }

type quorumConfig struct {
	node        []Option
	nodeTimeout time.Duration
	driftFactor float64
	driftFixed  time.Duration
	err         error
}

func (o Option) applyQuorum(c *quorumConfig) { c.node = append(c.node, o) }

type quorumOpt func(*quorumConfig)

func (o quorumOpt) applyQuorum(c *quorumConfig) { o(c) }

func (c *quorumConfig) fail(arg, reason string) {
	if c.err == nil {
		c.err = &driver.ArgError{Arg: arg, Reason: reason}
	}
}

// WithNodeTimeout bounds how long a call waits for each node (default
// 50 ms; an acquisition never waits longer than its lease). Keep it far
// below the lease: Redlock's argument needs the time spent acquiring to be
// small against the validity. A node that has not answered in time counts
// as failed, and a grant it may still make is released.
func WithNodeTimeout(d time.Duration) QuorumOption {
	return quorumOpt(func(c *quorumConfig) {
		if d <= 0 {
			c.fail("redislock node timeout", "must be positive")
			return
		}
		c.nodeTimeout = d
	})
}

// WithQuorumDrift sets the clock drift allowance subtracted from each
// grant's validity: lease·factor + fixed (default 0.01 and 2 ms).
func WithQuorumDrift(factor float64, fixed time.Duration) QuorumOption {
	return quorumOpt(func(c *quorumConfig) {
		if factor < 0 || factor >= 1 || fixed < 0 {
			c.fail("redislock quorum drift", "need 0 <= factor < 1 and fixed >= 0")
			return
		}
		c.driftFactor, c.driftFixed = factor, fixed
	})
}

// NewQuorum returns a Redlock backend over clients, one per independent
// Redis node (each a *redis.Client to a primary; replicas add nothing to
// Redlock's argument). It does not take ownership of the clients. Zero
// clients, a nil client, the same client twice, two clients with the same
// address or an invalid option are reported by every call as an
// *driver.ArgError; two clients that reach the same server under different
// addresses are found by the first call (INFO server run_id) and refused
// from then on.
func NewQuorum(clients []redis.UniversalClient, opts ...QuorumOption) *Quorum {
	cfg := quorumConfig{nodeTimeout: DefaultNodeTimeout, driftFactor: DefaultDriftFactor, driftFixed: DefaultDriftFixed}
	for _, o := range opts {
		if o != nil {
			o.applyQuorum(&cfg)
		}
	}
	q := &Quorum{cfg: cfg, quorum: len(clients)/2 + 1, err: cfg.err}
	nc := defaultConfig()
	for _, o := range cfg.node {
		if o != nil {
			o(&nc)
		}
	}
	q.prefix = nc.prefix
	if q.err == nil {
		q.err = nc.err
	}
	if q.err == nil && len(clients) == 0 {
		q.err = &driver.ArgError{Arg: "redis clients", Reason: "none given"}
	}
	addrs := make(map[string]int)
	for i, c := range clients {
		if c == nil {
			if q.err == nil {
				q.err = &driver.ArgError{Arg: "redis clients", Reason: fmt.Sprintf("client %d is nil", i)}
			}
			continue
		}
		for j, d := range clients[:i] {
			if d == c && q.err == nil {
				q.err = &driver.ArgError{Arg: "redis clients", Reason: fmt.Sprintf("clients %d and %d are the same client", j, i)}
			}
		}
		if rc, ok := c.(*redis.Client); ok {
			a := normAddr(rc.Options().Addr)
			if j, dup := addrs[a]; dup && q.err == nil {
				q.err = &driver.ArgError{Arg: "redis clients", Reason: fmt.Sprintf("clients %d and %d both point at %s", j, i, a)}
			}
			addrs[a] = i
		}
		q.nodes = append(q.nodes, &quorumNode{b: New(c, append(slices.Clip(cfg.node), racingWaiters(), clockTokens())...), rdb: c})
	}
	return q
}

// normAddr maps the usual spellings of the loopback host to one.
func normAddr(a string) string {
	for _, h := range []string{"localhost:", "[::1]:", "::1:"} {
		if rest, ok := strings.CutPrefix(a, h); ok {
			return "127.0.0.1:" + rest
		}
	}
	return a
}

// Nodes returns the number of nodes; Majority the number of grants a lock
// needs (Nodes/2 + 1).
func (q *Quorum) Nodes() int    { return len(q.nodes) }
func (q *Quorum) Majority() int { return q.quorum }

func (q *Quorum) getErr() error {
	q.errMu.Lock()
	defer q.errMu.Unlock()
	return q.err
}

func (q *Quorum) drift(lease time.Duration) time.Duration {
	return time.Duration(float64(lease)*q.cfg.driftFactor) + q.cfg.driftFixed
}

// nodeAnswer is one node's reply to one call.
type nodeAnswer struct {
	res driver.Result
	d   time.Duration
	err error
	ok  bool // answered (else still pending when the call ended)
}

// fanout runs fn on every node concurrently and collects the answers until
// all have answered, done reports that the outcome is decided, the budget
// has passed or ctx ends. Answers arriving later go to late (if not nil)
// with ended = true, from the node's goroutine. The node calls run under a
// context bounded by budget that outlives the collection, so a straggler is
// not cut off by the collection ending. The node goroutines record their
// answers and evaluate done themselves, so the caller wakes once per call,
// not once per node.
func (q *Quorum) fanout(ctx context.Context, budget time.Duration,
	fn func(ctx context.Context, i int, n *quorumNode) nodeAnswer,
	done func(ans []nodeAnswer) bool,
	late func(i int, a nodeAnswer),
) []nodeAnswer {
	n := len(q.nodes)
	nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget)
	f := &fan{ans: make([]nodeAnswer, n), decided: make(chan struct{}), cancel: cancel}
	f.left.Store(int32(n))
	for i, nd := range q.nodes {
		go f.run(nctx, i, nd, fn, done, late)
	}
	// nctx ends at the budget, or when the last node call has finished,
	// after decided was closed.
	select {
	case <-f.decided:
	case <-nctx.Done():
	case <-ctx.Done():
	}
	f.mu.Lock()
	f.ended = true
	snapshot := slices.Clone(f.ans)
	f.mu.Unlock()
	return snapshot
}

// fan is the shared state of one fanout.
type fan struct {
	mu      sync.Mutex
	ans     []nodeAnswer
	got     int
	ended   bool          // the caller has taken its snapshot
	decided chan struct{} // closed once every node answered or done said so
	left    atomic.Int32  // node calls still running
	cancel  context.CancelFunc
}

func (f *fan) run(ctx context.Context, i int, nd *quorumNode,
	fn func(ctx context.Context, i int, n *quorumNode) nodeAnswer,
	done func(ans []nodeAnswer) bool,
	late func(i int, a nodeAnswer),
) {
	// The last node call to finish cancels the calls' context (no goroutine
	// waits for it).
	defer func() {
		if f.left.Add(-1) == 0 {
			f.cancel()
		}
	}()
	a := fn(ctx, i, nd)
	a.ok = true
	f.mu.Lock()
	if f.ended {
		f.mu.Unlock()
		if late != nil {
			late(i, a)
		}
		return
	}
	f.ans[i] = a
	f.got++
	if f.got == len(f.ans) || (done != nil && done(f.ans)) {
		select {
		case <-f.decided:
		default:
			close(f.decided)
		}
	}
	f.mu.Unlock()
}

func (q *Quorum) check(ctx context.Context) error {
	if err := q.getErr(); err != nil {
		return err
	}
	return ctx.Err()
}

// Acquire implements driver.Backend: one attempt on every node at once.
func (q *Quorum) Acquire(ctx context.Context, req driver.Request) (driver.Result, error) {
	if err := q.check(ctx); err != nil {
		return driver.Result{}, err
	}
	start := time.Now()
	drift := q.drift(req.Lease)
	budget := min(q.cfg.nodeTimeout, req.Lease)
	if budget <= 0 {
		budget = q.cfg.nodeTimeout
	}
	skip := q.beginAttempt(req.Key, req.Owner)
	fairWait := req.Fair && req.Wait
	probe := !q.verified.Load()
	n, maj := len(q.nodes), q.quorum
	var decided sync.WaitGroup
	decided.Add(1)
	var lateDone func(i int, release bool)
	ans := q.fanout(ctx, budget,
		func(ctx context.Context, i int, nd *quorumNode) nodeAnswer {
			if skip != nil && skip[i] {
				return nodeAnswer{err: errReleasing}
			}
			var wg sync.WaitGroup
			if probe && nd.runID.Load() == nil {
				wg.Go(func() { nd.probe(ctx) }) // beside the attempt, not before it
			}
			r, err := nd.b.Acquire(ctx, req)
			wg.Wait()
			return nodeAnswer{res: r, err: err}
		},
		func(ans []nodeAnswer) bool {
			// A failure is decided once too many nodes said no. A success
			// waits for every node (or the node timeout), so that the token
			// and the set of holding nodes do not depend on stragglers. So
			// does a fair waiter's failure: it is queued on every node that
			// answers before the attempt returns, and a grant among the
			// answers is yielded rather than released (quorum_yield.go).
			if fairWait {
				return false
			}
			r := 0
			for _, a := range ans {
				if a.ok && (a.err != nil || !a.res.Acquired) {
					r++
				}
			}
			return r > n-maj
		},
		func(i int, a nodeAnswer) {
			// A node that answered after the call ended counts as failed:
			// whatever it granted is taken back, on success too.
			decided.Wait()
			lateDone(i, a.res.Acquired || (a.err != nil && !notSent(a.err)))
		})
	var granted, refused, unknown, pending int
	var tok driver.Token
	var ttls []time.Duration
	for _, a := range ans {
		if !a.ok {
			pending++
		}
		switch {
		case !a.ok || a.err != nil:
			unknown++
		case a.res.Acquired:
			granted++
			tok = max(tok, a.res.Token)
		default:
			refused++
			ttls = append(ttls, a.res.TTL)
		}
	}
	if pending > 0 {
		lateDone = q.expectLate(req.Key, req.Owner, pending)
	}
	validity := req.Lease - time.Since(start) - drift
	var dupErr error
	if probe {
		dupErr = q.verify()
	}
	if dupErr == nil && granted >= maj && validity > 0 && ctx.Err() == nil {
		decided.Done()
		if fairWait {
			q.yields.end(lateKey{req.Key, req.Owner})
			tok = q.settleQueues(req, ans, tok)
		}
		return driver.Result{Acquired: true, Token: tok, TTL: validity}, nil
	}
	decided.Done()
	// Take back what may have been granted: only where a node granted or
	// did not answer. A refusing node granted nothing. A fair waiter first
	// in line on a majority yields its grants, keeping its place
	// (quorum_yield.go).
	yield := fairWait && granted > 0 && granted < maj && dupErr == nil && ctx.Err() == nil && q.keepPlace(req, ans)
	var wg sync.WaitGroup
	for i, a := range ans {
		nd := q.nodes[i]
		switch {
		case !a.ok:
		case yield && a.err == nil && a.res.Acquired:
			wg.Go(func() { q.yieldNode(nd, req) })
		case a.res.Acquired || (a.err != nil && !notSent(a.err)):
			wg.Go(func() { q.releaseNode(nd, req.Key, req.Owner) })
		}
	}
	wg.Wait()
	switch {
	case dupErr != nil:
		return driver.Result{}, dupErr
	case ctx.Err() != nil:
		return driver.Result{}, ctx.Err()
	case granted >= maj:
		return driver.Result{}, driver.Unavailable("quorum acquire", fmt.Errorf(
			"%d of %d nodes granted, but only after %v, beyond the lease %v less drift %v", granted, n, time.Since(start).Round(time.Microsecond), req.Lease, drift))
	case refused > n-maj:
		// Held elsewhere. The key frees for us once enough refusing nodes
		// let go: the k-th shortest remaining lease among them.
		slices.Sort(ttls)
		k := refused - (n - maj)
		return driver.Result{TTL: ttls[k-1]}, nil
	}
	return driver.Result{}, driver.Unavailable("quorum acquire", fmt.Errorf(
		"%d of %d nodes granted, %d refused, %d failed or timed out (%v); %d needed", granted, n, refused, unknown, firstErr(ans), maj))
}

func firstErr(ans []nodeAnswer) error {
	for _, a := range ans {
		if a.err != nil {
			return a.err
		}
	}
	return errors.New("no answer within the node timeout")
}

// releaseNode releases key on one node, bounded by the node timeout (at
// least 1 s: it cleans up and nobody waits for it on a hot path).
func (q *Quorum) releaseNode(nd *quorumNode, key string, owner driver.Owner) {
	ctx, cancel := context.WithTimeout(context.Background(), max(q.cfg.nodeTimeout, time.Second))
	defer cancel()
	_ = nd.b.Release(ctx, key, owner)
}

// probe records the node's run_id (INFO server).
func (nd *quorumNode) probe(ctx context.Context) {
	s, err := nd.rdb.Info(ctx, "server").Result()
	if err != nil {
		return
	}
	for line := range strings.SplitSeq(s, "\n") {
		if id, ok := strings.CutPrefix(strings.TrimSpace(line), "run_id:"); ok && id != "" {
			nd.runID.Store(&id)
			return
		}
	}
}

// verify refuses the backend for good if two nodes reported the same
// run_id, and marks it verified once every node has reported one.
func (q *Quorum) verify() error {
	seen := make(map[string]int, len(q.nodes))
	all := true
	for i, nd := range q.nodes {
		id := nd.runID.Load()
		if id == nil {
			all = false
			continue
		}
		if j, dup := seen[*id]; dup {
			err := &driver.ArgError{Arg: "redis clients", Reason: fmt.Sprintf("clients %d and %d reach the same server (run_id %s)", j, i, *id)}
			q.errMu.Lock()
			if q.err == nil {
				q.err = err
			}
			q.errMu.Unlock()
			return err
		}
		seen[*id] = i
	}
	if all {
		q.verified.Store(true)
	}
	return nil
}

// verdict turns per-node outcomes of Extend, Release or TTL into one: nil if
// at least need nodes succeeded, ErrNotHeld if so many nodes said "not
// held" that need successes are impossible, else an unavailable error.
func (q *Quorum) verdict(op string, ans []nodeAnswer, need int) error {
	ok, notHeld := 0, 0
	for _, a := range ans {
		switch {
		case a.ok && a.err == nil:
			ok++
		case a.ok && errors.Is(a.err, driver.ErrNotHeld):
			notHeld++
		}
	}
	switch {
	case ok >= need:
		return nil
	case notHeld > len(ans)-need:
		return driver.ErrNotHeld
	}
	return driver.Unavailable("quorum "+op, fmt.Errorf("%d of %d nodes succeeded, %d needed (%v)", ok, len(ans), need, firstErr(ans)))
}

// Extend implements driver.Backend: the lease is renewed only if a majority
// renewed it within the lease.
func (q *Quorum) Extend(ctx context.Context, key string, owner driver.Owner, lease time.Duration) error {
	if err := q.check(ctx); err != nil {
		return err
	}
	start := time.Now()
	ans := q.fanout(ctx, min(q.cfg.nodeTimeout, lease),
		func(ctx context.Context, _ int, nd *quorumNode) nodeAnswer {
			return nodeAnswer{err: nd.b.Extend(ctx, key, owner, lease)}
		}, nil, nil)
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := q.verdict("extend", ans, q.quorum); err != nil {
		return err
	}
	if time.Since(start) >= lease-q.drift(lease) {
		return driver.Unavailable("quorum extend", fmt.Errorf("renewal took %v, beyond the lease %v", time.Since(start), lease))
	}
	return nil
}

// ExtendMany implements driver.BatchExtender: one pipeline per node, all
// nodes at once, and a majority per request.
func (q *Quorum) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []error {
	errs := make([]error, len(reqs))
	if len(reqs) == 0 {
		return errs
	}
	if err := q.check(ctx); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	start := time.Now()
	shortest := reqs[0].Lease
	for _, r := range reqs {
		shortest = min(shortest, r.Lease)
	}
	per := make([][]error, len(q.nodes))
	var mu sync.Mutex
	ans := q.fanout(ctx, min(q.cfg.nodeTimeout, shortest),
		func(ctx context.Context, i int, nd *quorumNode) nodeAnswer {
			e := nd.b.ExtendMany(ctx, reqs)
			mu.Lock()
			per[i] = e
			mu.Unlock()
			return nodeAnswer{}
		}, nil, nil)
	mu.Lock()
	defer mu.Unlock()
	one := make([]nodeAnswer, len(q.nodes))
	for r := range reqs {
		for i := range q.nodes {
			one[i] = nodeAnswer{ok: ans[i].ok && per[i] != nil}
			if one[i].ok {
				one[i].err = per[i][r]
			}
		}
		errs[r] = q.verdict("extend", one, q.quorum)
		if errs[r] == nil && time.Since(start) >= reqs[r].Lease-q.drift(reqs[r].Lease) {
			errs[r] = driver.Unavailable("quorum extend", fmt.Errorf("renewal took %v, beyond the lease %v", time.Since(start), reqs[r].Lease))
		}
	}
	return errs
}

// Release implements driver.Backend: it releases key on every node (and
// withdraws owner from every node's fair queue). It returns nil if any node
// released it, ErrNotHeld if a majority said owner held nothing.
func (q *Quorum) Release(ctx context.Context, key string, owner driver.Owner) error {
	if err := q.check(ctx); err != nil {
		return err
	}
	ans := q.fanout(ctx, max(q.cfg.nodeTimeout, 250*time.Millisecond),
		func(ctx context.Context, _ int, nd *quorumNode) nodeAnswer {
			return nodeAnswer{err: nd.b.Release(ctx, key, owner)}
		}, nil, nil)
	q.yields.end(lateKey{key, owner})
	released, notHeld := 0, 0
	for _, a := range ans {
		switch {
		case a.ok && a.err == nil:
			released++
		case a.ok && errors.Is(a.err, driver.ErrNotHeld):
			notHeld++
		}
	}
	switch {
	case released > 0:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case notHeld >= q.quorum:
		return driver.ErrNotHeld
	}
	return driver.Unavailable("quorum release", fmt.Errorf("%d of %d nodes answered not held, %d needed (%v)", notHeld, len(ans), q.quorum, firstErr(ans)))
}

// TTL implements driver.Backend: the time a majority still holds the lease
// for owner (the Majority-th longest remaining lease).
func (q *Quorum) TTL(ctx context.Context, key string, owner driver.Owner) (time.Duration, error) {
	if err := q.check(ctx); err != nil {
		return 0, err
	}
	ans := q.fanout(ctx, q.cfg.nodeTimeout,
		func(ctx context.Context, _ int, nd *quorumNode) nodeAnswer {
			d, err := nd.b.TTL(ctx, key, owner)
			return nodeAnswer{d: d, err: err}
		}, nil, nil)
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := q.verdict("ttl", ans, q.quorum); err != nil {
		return 0, err
	}
	var ds []time.Duration
	for _, a := range ans {
		if a.ok && a.err == nil {
			ds = append(ds, a.d)
		}
	}
	slices.Sort(ds)
	slices.Reverse(ds)
	return ds[q.quorum-1], nil
}

// Watch implements driver.Notifier: it watches key on every node and wakes on
// the first notification of any; one wake-up channel of capacity one
// absorbs the others. It fails only if no node's watch could be set up.
func (q *Quorum) Watch(ctx context.Context, key string, owner driver.Owner) (<-chan struct{}, func(), error) {
	if err := q.check(ctx); err != nil {
		return nil, nil, err
	}
	type w struct {
		ch     <-chan struct{}
		cancel func()
		err    error
	}
	ws := make([]w, len(q.nodes))
	var wg sync.WaitGroup
	for i, nd := range q.nodes {
		watch := func() {
			ch, c, err := nd.b.Watch(ctx, key, owner)
			ws[i] = w{ch, c, err}
		}
		select {
		case <-nd.b.n.ready: // subscribed: Watch returns at once
			watch()
		default: // Watch may wait for the subscription: not in turn
			wg.Go(watch)
		}
	}
	wg.Wait()
	stop := make(chan struct{})
	cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(stop)}}
	var cancels []func()
	var lastErr error
	for _, x := range ws {
		if x.err != nil {
			lastErr = x.err
			continue
		}
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(x.ch)})
		cancels = append(cancels, x.cancel)
	}
	if len(cancels) == 0 {
		return nil, nil, lastErr
	}
	out := make(chan struct{}, 1)
	go func() {
		for {
			i, _, _ := reflect.Select(cases)
			if i == 0 {
				return
			}
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}()
	var once sync.Once
	cancel := func() {
		once.Do(func() {
			close(stop)
			for _, c := range cancels {
				c()
			}
		})
	}
	return out, cancel, nil
}

// Close implements driver.Backend: it closes every node's Backend (their
// wake-up subscriptions), not the clients.
func (q *Quorum) Close() error {
	for _, nd := range q.nodes {
		_ = nd.b.Close()
	}
	return nil
}
