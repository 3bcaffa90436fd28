package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/lockxtest"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// quorumNodeTimeout is generous: the tests share two cores and run with
// -race; the fault tests set their own where timing matters.
const quorumNodeTimeout = 300 * time.Millisecond

// startNodes starts n throwaway redis-servers (no persistence) at once.
func startNodes(t testing.TB, n int) []*testenv.RedisServer {
	t.Helper()
	srv := make([]*testenv.RedisServer, n)
	var wg sync.WaitGroup
	for i := range srv {
		wg.Go(func() { srv[i] = testenv.StartRedis(t) })
	}
	wg.Wait()
	for _, s := range srv {
		if s == nil {
			t.FailNow()
		}
	}
	return srv
}

// nodeClients returns one client per address, closed at cleanup, with
// short dial and I/O timeouts and no retries (a quorum retries by itself).
func nodeClients(t testing.TB, addrs ...string) []redis.UniversalClient {
	t.Helper()
	cs := make([]redis.UniversalClient, len(addrs))
	for i, a := range addrs {
		// DialerRetries 1: a dead node fails at once (connection refused)
		// instead of after go-redis's 5 dials 100 ms apart.
		rdb := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1, DialTimeout: time.Second, DialerRetries: 1,
			ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second})
		t.Cleanup(func() { _ = rdb.Close() })
		cs[i] = rdb
	}
	return cs
}

func addrsOf(srv []*testenv.RedisServer) []string {
	a := make([]string, len(srv))
	for i, s := range srv {
		a[i] = s.Addr
	}
	return a
}

func newQuorum(t testing.TB, clients []redis.UniversalClient, opts ...redislock.QuorumOption) *redislock.Quorum {
	t.Helper()
	all := append([]redislock.QuorumOption{redislock.WithPrefix(testPrefix()), redislock.WithNodeTimeout(quorumNodeTimeout)}, opts...)
	q := redislock.NewQuorum(clients, all...)
	t.Cleanup(func() { _ = q.Close() })
	return q
}

// holders reports, per node, whether some owner holds key (a lock value
// longer than a tombstone's 8 bytes), read straight from the node.
func holders(t *testing.T, addrs []string, prefix, key string) []bool {
	t.Helper()
	out := make([]bool, len(addrs))
	for i, a := range addrs {
		rdb := clientAt(t, a)
		v, err := rdb.Get(context.Background(), prefix+"{"+key+"}").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("node %d: %v", i, err)
		}
		out[i] = len(v) > 8
	}
	return out
}

func count(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

func TestQuorumConformance(t *testing.T) {
	srv := startNodes(t, 5)
	cs := nodeClients(t, addrsOf(srv)...)
	prefix := testPrefix()
	lockxtest.Run(t, func(t *testing.T) driver.Backend {
		return redislock.NewQuorum(cs, redislock.WithPrefix(prefix), redislock.WithNodeTimeout(quorumNodeTimeout))
	})
}

func TestQuorumBadInput(t *testing.T) {
	ctx := ctxT(t, 5*time.Second)
	r := req("k", lockx.NewOwner(), time.Second)
	expectArg := func(name string, q *redislock.Quorum) {
		t.Helper()
		if _, err := q.Acquire(ctx, r); !errors.Is(err, lockx.ErrInvalidArgument) {
			t.Errorf("%s: Acquire = %v, want *ArgError", name, err)
		}
	}
	expectArg("no clients", redislock.NewQuorum(nil))
	srv := startNodes(t, 4)
	cs := nodeClients(t, addrsOf(srv)...)
	expectArg("nil client", redislock.NewQuorum([]redis.UniversalClient{cs[0], nil, cs[1]}))
	expectArg("same client twice", redislock.NewQuorum([]redis.UniversalClient{cs[0], cs[1], cs[0]}))
	expectArg("same address", redislock.NewQuorum(append(cs[:3:3], nodeClients(t, srv[1].Addr)...)))
	expectArg("localhost alias", redislock.NewQuorum(append(cs[:3:3], nodeClients(t, "localhost:"+itoa(srv[2].Port))...)))
	expectArg("bad node timeout", redislock.NewQuorum(cs, redislock.WithNodeTimeout(0)))
	expectArg("bad drift", redislock.NewQuorum(cs, redislock.WithQuorumDrift(1, 0)))
	expectArg("bad prefix", redislock.NewQuorum(cs, redislock.WithPrefix("{x}")))

	// The same server behind another address (a proxy) is found by its
	// run_id at the first call and refused for good, with nothing left held.
	p := startToxic(t, srv[0].Addr)
	prefix := testPrefix()
	dup := redislock.NewQuorum(append(cs[:3:3], nodeClients(t, p.addr)...), redislock.WithPrefix(prefix), redislock.WithNodeTimeout(quorumNodeTimeout))
	expectArg("same server via proxy", dup)
	expectArg("same server via proxy, again", dup)
	if h := holders(t, addrsOf(srv[:3]), prefix, "k"); count(h) != 0 {
		t.Errorf("refused backend left holders %v", h)
	}

	// An even N is allowed: 4 nodes need 3.
	q := newQuorum(t, cs)
	if q.Nodes() != 4 || q.Majority() != 3 {
		t.Fatalf("4 nodes: Nodes %d Majority %d", q.Nodes(), q.Majority())
	}
	if res, err := q.Acquire(ctx, r); err != nil || !res.Acquired {
		t.Fatalf("4 nodes: %+v %v", res, err)
	}
}

func itoa(i int) string { return string(appendInt(nil, i)) }

func appendInt(b []byte, i int) []byte {
	if i >= 10 {
		b = appendInt(b, i/10)
	}
	return append(b, byte('0'+i%10))
}

// TestQuorumNodeFailures: 5 nodes survive 2 crashes, fail closed with 3,
// and recover when they come back.
func TestQuorumNodeFailures(t *testing.T) {
	srv := startNodes(t, 5)
	q := newQuorum(t, nodeClients(t, addrsOf(srv)...), redislock.WithNodeTimeout(200*time.Millisecond))
	c := lockx.New(q)
	t.Cleanup(func() { _ = c.Close() })
	ctx := ctxT(t, 30*time.Second)

	use := func(what string) {
		t.Helper()
		l, err := c.Acquire(ctx, "failures", lockx.WithWait(3*time.Second))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatalf("%s: release: %v", what, err)
		}
	}
	use("all up")
	srv[0].Kill()
	srv[1].Kill()
	use("2 of 5 down")

	// A lock held across the third crash is lost: its renewal has no
	// majority any more.
	held, err := c.Acquire(ctx, "held", lockx.WithLease(600*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	srv[2].Kill()
	select {
	case <-held.Lost():
	case <-time.After(3 * time.Second):
		t.Fatal("a lock without a majority was not reported lost")
	}

	const wait = 500 * time.Millisecond
	start := time.Now()
	_, err = c.Acquire(ctx, "failures", lockx.WithWait(wait))
	took := time.Since(start)
	if !errors.Is(err, lockx.ErrUnavailable) || !errors.Is(err, lockx.ErrNotAcquired) {
		t.Fatalf("3 of 5 down: err = %v, want ErrNotAcquired and ErrUnavailable", err)
	}
	if took > wait+2*time.Second { // ≈ wait + one node timeout + the give-up release when idle; slack for a loaded machine
		t.Fatalf("3 of 5 down: failed after %v, wait budget %v", took, wait)
	}
	t.Logf("3 of 5 down: failed closed after %v (wait %v): %v", took.Round(time.Millisecond), wait, err)

	for _, s := range srv[:3] {
		s.Restart(t)
	}
	use("restarted")
}

// toxic is an in-process toxiproxy proxy (github.com/Shopify/toxiproxy/v2)
// in front of one node, stopped at cleanup.
type toxic struct {
	p    *toxiproxy.Proxy
	addr string
}

// toxiServer owns the test binary's proxies (no API listener, no metrics,
// no log).
var toxiServer = sync.OnceValue(func() *toxiproxy.ApiServer {
	return toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
})

func startToxic(t testing.TB, target string) *toxic {
	t.Helper()
	p := toxiproxy.NewProxy(toxiServer(), t.Name()+"->"+target, "127.0.0.1:0", target)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return &toxic{p: p, addr: p.Listen}
}

// latency sets a latency toxic on one direction of x ("upstream":
// client→server, "downstream": server→client); 0 removes it.
func (x *toxic) latency(t testing.TB, stream string, d time.Duration) {
	t.Helper()
	name := "latency_" + stream
	if err := x.p.Toxics.RemoveToxic(context.Background(), name); err != nil && !errors.Is(err, toxiproxy.ErrToxicNotFound) {
		t.Fatal(err)
	}
	if d <= 0 {
		return
	}
	body := fmt.Sprintf(`{"name":%q,"type":"latency","stream":%q,"attributes":{"latency":%d}}`, name, stream, d.Milliseconds())
	if _, err := x.p.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
		t.Fatal(err)
	}
}

// TestQuorumSlowNodes: latency on 2 of 5 nodes does not slow a grant past
// the node timeout; an acquisition slower than its lease allows (latency on
// 3 of 5) is reported failed and leaves nothing held.
func TestQuorumSlowNodes(t *testing.T) {
	srv := startNodes(t, 5)
	addrs := addrsOf(srv)
	proxies := make([]*toxic, 5)
	via := make([]string, 5)
	for i, s := range srv {
		proxies[i] = startToxic(t, s.Addr)
		via[i] = proxies[i].addr
	}
	ctx := ctxT(t, 30*time.Second)
	prefix := testPrefix()
	cs := nodeClients(t, via...)

	t.Run("2 of 5 slow", func(t *testing.T) {
		const nodeTimeout = 300 * time.Millisecond
		q := redislock.NewQuorum(cs, redislock.WithPrefix(prefix), redislock.WithNodeTimeout(nodeTimeout))
		t.Cleanup(func() { _ = q.Close() })
		// Warm: every node's connection and run_id probe.
		if res, err := q.Acquire(ctx, req("warm", lockx.NewOwner(), time.Second)); err != nil || !res.Acquired {
			t.Fatalf("warm-up: %+v %v", res, err)
		}
		for _, p := range proxies[:2] {
			p.latency(t, "upstream", time.Second)
		}
		defer func() {
			for _, p := range proxies[:2] {
				p.latency(t, "upstream", 0)
			}
		}()
		var worst time.Duration
		for i := range 5 {
			start := time.Now()
			res, err := q.Acquire(ctx, req("slow2-"+itoa(i), lockx.NewOwner(), 5*time.Second))
			took := time.Since(start)
			worst = max(worst, took)
			if err != nil || !res.Acquired {
				t.Fatalf("attempt %d with 2 slow nodes: %+v %v", i, res, err)
			}
			if res.TTL <= 0 || res.TTL > 5*time.Second-took {
				t.Fatalf("validity %v after %v", res.TTL, took)
			}
		}
		if worst > nodeTimeout+300*time.Millisecond {
			t.Fatalf("acquire with 2 slow nodes took %v, node timeout %v", worst, nodeTimeout)
		}
		t.Logf("2 of 5 nodes 1 s slow: slowest of 5 grants took %v", worst.Round(time.Microsecond))
	})

	t.Run("elapsed beyond validity", func(t *testing.T) {
		// 300 ms each way on 3 nodes: a majority answers after ~600 ms. With
		// a 2 s lease and a drift allowance of 75 % the validity is gone.
		q := redislock.NewQuorum(cs, redislock.WithPrefix(prefix), redislock.WithNodeTimeout(3*time.Second),
			redislock.WithQuorumDrift(0.75, 0))
		t.Cleanup(func() { _ = q.Close() })
		// Warm: connections, and both scripts loaded (a first EVALSHA of the
		// release script would cost a NOSCRIPT round trip more).
		warm := lockx.NewOwner()
		if res, err := q.Acquire(ctx, req("warm2", warm, time.Second)); err != nil || !res.Acquired {
			t.Fatalf("warm-up: %+v %v", res, err)
		}
		if err := q.Release(ctx, "warm2", warm); err != nil {
			t.Fatalf("warm-up release: %v", err)
		}
		for _, p := range proxies[2:] {
			p.latency(t, "upstream", 300*time.Millisecond)
			p.latency(t, "downstream", 300*time.Millisecond)
		}
		defer func() {
			for _, p := range proxies[2:] {
				p.latency(t, "upstream", 0)
				p.latency(t, "downstream", 0)
			}
		}()
		start := time.Now()
		res, err := q.Acquire(ctx, req("late", lockx.NewOwner(), 2*time.Second))
		took := time.Since(start)
		if res.Acquired || !errors.Is(err, lockx.ErrUnavailable) {
			t.Fatalf("acquire after %v: %+v %v; want a failure", took, res, err)
		}
		// The grants (2 s leases, made ~300 ms in) would live on to ~2.3 s;
		// the failed attempt must have taken them back: one round trip to
		// acquire and one to release, ~1.2 s.
		if took > 2*time.Second {
			t.Fatalf("acquire took %v", took)
		}
		if h := holders(t, addrs, prefix, "late"); count(h) != 0 {
			t.Fatalf("failed acquire (%v) left holders on nodes %v", took, h)
		}
		t.Logf("3 of 5 nodes 600 ms round trip: failed after %v: %v", took.Round(time.Millisecond), err)
	})
}

// serverCalls sums, over the nodes, the calls of the given commands as the
// servers count them (INFO commandstats).
func serverCalls(t *testing.T, addrs []string, names ...string) int64 {
	t.Helper()
	var n int64
	for _, a := range addrs {
		info, err := clientAt(t, a).Info(context.Background(), "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(info, "\n") {
			for _, name := range names {
				if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+name+":calls="); ok {
					v, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
					n += v
				}
			}
		}
	}
	return n
}

// TestQuorumRetryLoad measures, on the servers, the commands a failed
// attempt costs: a refusal by every node costs one script call per node and
// nothing more; a split (a minority granted) adds one release per granting
// node only. redsync sends a release to every node after every failed try.
func TestQuorumRetryLoad(t *testing.T) {
	srv := startNodes(t, 5)
	addrs := addrsOf(srv)
	cs := nodeClients(t, addrs...)
	prefix := testPrefix()
	q := newQuorum(t, cs, redislock.WithPrefix(prefix))
	ctx := ctxT(t, 20*time.Second)
	if res, err := q.Acquire(ctx, req("storm", lockx.NewOwner(), 10*time.Second)); err != nil || !res.Acquired {
		t.Fatal(res, err)
	}
	const tries = 100
	calls := func() int64 {
		time.Sleep(50 * time.Millisecond) // stragglers of an early-decided refusal
		return serverCalls(t, addrs, "evalsha", "eval", "publish", "info")
	}
	before := calls()
	for range tries {
		if res, err := q.Acquire(ctx, req("storm", lockx.NewOwner(), 10*time.Second)); err != nil || res.Acquired {
			t.Fatal(res, err)
		}
	}
	perRefused := float64(calls()-before-5) / tries // less calls()'s own INFO
	if perRefused > 5 {
		t.Fatalf("a refused attempt costs %.2f commands on 5 nodes, want 5", perRefused)
	}

	// A split: another owner holds the key on nodes 0-2 → 2 grants and 3
	// refusals; only the 2 grants are undone.
	o := lockx.NewOwner()
	for _, c := range cs[:3] {
		b := redislock.New(c, redislock.WithPrefix(prefix))
		t.Cleanup(func() { _ = b.Close() })
		mustGrant(t, b, req("split", o, 10*time.Second))
	}
	before = calls()
	for range tries {
		if res, err := q.Acquire(ctx, req("split", lockx.NewOwner(), 10*time.Second)); err != nil || res.Acquired {
			t.Fatal(res, err)
		}
	}
	perSplit := float64(calls()-before-5) / tries
	if perSplit > 7 {
		t.Fatalf("a split attempt costs %.2f commands on 5 nodes, want 5 + 2 releases", perSplit)
	}
	t.Logf("server-side commands per failed attempt on 5 nodes: %.2f refused everywhere, %.2f with 2 grants undone (redsync: 5 acquires + 5 releases = 10)", perRefused, perSplit)
}

// fenceStore is the resource: a single Redis (the machine's), checked with
// FencedSet, or written blindly with fencing off.
type resource struct {
	t      *testing.T
	b      *redislock.Backend
	rdb    *redis.Client
	name   string
	key    string
	fenced bool
}

func newResource(t *testing.T, fenced bool) *resource {
	rdb := single(t)
	name := "doc-" + randHex(4)
	r := &resource{t: t, b: backend(t, rdb), rdb: rdb, name: name, key: "data:{" + name + "}", fenced: fenced}
	t.Cleanup(func() { _ = rdb.Del(context.Background(), r.key).Err() })
	return r
}

func (r *resource) write(tok lockx.Token, v string) error {
	ctx := context.Background()
	if r.fenced {
		return r.b.FencedSet(ctx, r.name, tok, r.key, v, time.Minute)
	}
	return r.rdb.Set(ctx, r.key, v, time.Minute).Err()
}

func (r *resource) value() string {
	v, _ := r.rdb.Get(context.Background(), r.key).Result()
	return v
}

// kleppmann runs a double-grant scenario with fencing on and off: grant
// makes two holders A then B (tokens ta, tb); B writes, then the stale A.
func kleppmann(t *testing.T, grant func(t *testing.T) (ta, tb lockx.Token)) {
	for _, fenced := range []bool{true, false} {
		name := "fencing off"
		if fenced {
			name = "fencing on"
		}
		t.Run(name, func(t *testing.T) {
			ta, tb := grant(t)
			if tb <= ta {
				t.Fatalf("second grant's token %d not above the first's %d", tb, ta)
			}
			r := newResource(t, fenced)
			if err := r.write(tb, "B"); err != nil {
				t.Fatalf("B's write: %v", err)
			}
			err := r.write(ta, "A") // the stale holder resumes
			switch {
			case fenced && !errors.Is(err, lockx.ErrStaleToken):
				t.Fatalf("stale holder's fenced write: %v, want ErrStaleToken", err)
			case fenced && r.value() != "B":
				t.Fatalf("resource = %q after a rejected stale write, want B", r.value())
			case !fenced && (err != nil || r.value() != "A"):
				t.Fatalf("unfenced: err %v value %q; the stale write should land", err, r.value())
			}
			t.Logf("tokens A %d < B %d; stale write by A: %v; resource holds %q", ta, tb, err, r.value())
		})
	}
}

// TestQuorumKleppmannNodeLosesKey: A holds exactly a majority (2 nodes
// were down); one of A's nodes restarts without persistence and forgets the
// key; B gets the new majority. Both hold: Redlock's safety is gone, as
// theory says, and only the resource's fencing check saves the data.
func TestQuorumKleppmannNodeLosesKey(t *testing.T) {
	srv := startNodes(t, 5)
	cs := nodeClients(t, addrsOf(srv)...)
	prefix := testPrefix()
	ctx := ctxT(t, 30*time.Second)
	kleppmann(t, func(t *testing.T) (lockx.Token, lockx.Token) {
		key := "kl-" + randHex(4)
		qa := newQuorum(t, cs, redislock.WithPrefix(prefix))
		qb := newQuorum(t, cs, redislock.WithPrefix(prefix))
		srv[3].Kill()
		srv[4].Kill()
		ra, err := qa.Acquire(ctx, req(key, lockx.NewOwner(), 20*time.Second))
		if err != nil || !ra.Acquired {
			t.Fatalf("A: %+v %v", ra, err)
		}
		srv[3].Restart(t)
		srv[4].Restart(t)
		// B is refused while A's majority stands.
		if rb, err := qb.Acquire(ctx, req(key, lockx.NewOwner(), 20*time.Second)); err != nil || rb.Acquired {
			t.Fatalf("B while A holds 3 of 5: %+v %v", rb, err)
		}
		srv[2].Restart(t) // no persistence: A's key on node 2 is gone
		rb, err := qb.Acquire(ctx, req(key, lockx.NewOwner(), 20*time.Second))
		if err != nil || !rb.Acquired {
			t.Fatalf("B after node 2 forgot A's key: %+v %v; want the double grant", rb, err)
		}
		h := holders(t, addrsOf(srv), prefix, key)
		t.Logf("double grant: A (token %d) on nodes 0,1, B (token %d) on nodes 2,3,4; holders %v", ra.Token, rb.Token, h)
		return ra.Token, rb.Token
	})
}

// TestQuorumKleppmannPause: A pauses past its lease (a GC pause, a stopped
// VM), B is granted, A resumes and writes.
func TestQuorumKleppmannPause(t *testing.T) {
	srv := startNodes(t, 5)
	cs := nodeClients(t, addrsOf(srv)...)
	prefix := testPrefix()
	ctx := ctxT(t, 30*time.Second)
	kleppmann(t, func(t *testing.T) (lockx.Token, lockx.Token) {
		key := "pause-" + randHex(4)
		qa := newQuorum(t, cs, redislock.WithPrefix(prefix))
		qb := newQuorum(t, cs, redislock.WithPrefix(prefix))
		ra, err := qa.Acquire(ctx, req(key, lockx.NewOwner(), 300*time.Millisecond))
		if err != nil || !ra.Acquired {
			t.Fatalf("A: %+v %v", ra, err)
		}
		time.Sleep(400 * time.Millisecond) // A is paused past its lease
		rb, err := qb.Acquire(ctx, req(key, lockx.NewOwner(), 20*time.Second))
		if err != nil || !rb.Acquired {
			t.Fatalf("B after A's lease ran out: %+v %v", rb, err)
		}
		return ra.Token, rb.Token
	})
}

// TestQuorumValidityAndTokens: the reported validity is the lease less the
// elapsed time and drift; the token is the largest of the majority's.
func TestQuorumValidityAndTokens(t *testing.T) {
	srv := startNodes(t, 5)
	cs := nodeClients(t, addrsOf(srv)...)
	prefix := testPrefix()
	q := newQuorum(t, cs, redislock.WithPrefix(prefix))
	ctx := ctxT(t, 10*time.Second)
	// Raise node 4's previous token far above the others (a tombstone
	// ahead of the shared clock): the quorum's token follows the maximum.
	single4 := redislock.New(cs[4], redislock.WithPrefix(prefix), redislock.WithTombstone(time.Minute))
	t.Cleanup(func() { _ = single4.Close() })
	o := lockx.NewOwner()
	t4 := mustGrant(t, single4, req("tok", o, time.Second))
	if err := single4.Release(ctx, "tok", o); err != nil {
		t.Fatal(err)
	}
	res, err := q.Acquire(ctx, req("tok", lockx.NewOwner(), 10*time.Second))
	if err != nil || !res.Acquired {
		t.Fatal(res, err)
	}
	if res.Token <= t4 {
		t.Fatalf("token %d not above node 4's previous %d", res.Token, t4)
	}
	drift := time.Duration(float64(10*time.Second)*redislock.DefaultDriftFactor) + redislock.DefaultDriftFixed
	if res.TTL > 10*time.Second-drift || res.TTL < 10*time.Second-drift-time.Second {
		t.Fatalf("validity %v, want just under %v", res.TTL, 10*time.Second-drift)
	}
}

// TestQuorumTokensFollowClock: on a Quorum's nodes every grant's token
// follows the server clock, even over a tombstone — the quorum compares the
// tokens of different nodes, which only their clocks keep in step.
func TestQuorumTokensFollowClock(t *testing.T) {
	srv := startNodes(t, 3)
	cs := nodeClients(t, addrsOf(srv)...)
	q := newQuorum(t, cs, redislock.WithPrefix(testPrefix()))
	ctx := ctxT(t, 10*time.Second)
	var last lockx.Token
	for i := range 3 {
		o := lockx.NewOwner()
		res, err := q.Acquire(ctx, req("k", o, time.Second))
		if err != nil || !res.Acquired {
			t.Fatal(res, err)
		}
		if i > 0 && res.Token < last+lockx.Token(5*time.Millisecond/time.Microsecond) {
			t.Fatalf("grant %d: token %d, want the clock, at least 5 ms past %d", i, res.Token, last)
		}
		last = res.Token
		if err := q.Release(ctx, "k", o); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// BenchmarkQuorumPairs: uncontended acquire + release on 5 local nodes, by
// 1 and by 16 goroutines (each on keys of its own); reports pairs/s and the
// p99 of one pair.
func BenchmarkQuorumPairs(b *testing.B) {
	srv := startNodes(b, 5)
	cs := nodeClients(b, addrsOf(srv)...)
	q := newQuorum(b, cs)
	for _, par := range []int{1, 16} {
		b.Run("goroutines="+itoa(par), func(b *testing.B) { benchPairs(b, q, par) })
	}
}

func benchPairs(b *testing.B, q *redislock.Quorum, par int) {
	ctx := context.Background()
	var mu sync.Mutex
	var lat []time.Duration
	var seq atomic.Int64
	b.SetParallelism((par + maxprocs() - 1) / maxprocs())
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		key := "bench-" + itoa(int(seq.Add(1))) + "-" + randHex(4)
		local := make([]time.Duration, 0, 1024)
		for pb.Next() {
			o := lockx.NewOwner()
			t0 := time.Now()
			res, err := q.Acquire(ctx, req(key, o, 10*time.Second))
			if err != nil || !res.Acquired {
				b.Error(res, err)
				return
			}
			if err := q.Release(ctx, key, o); err != nil {
				b.Error(err)
				return
			}
			local = append(local, time.Since(t0))
		}
		mu.Lock()
		lat = append(lat, local...)
		mu.Unlock()
	})
	el := time.Since(start)
	b.StopTimer()
	if len(lat) > 0 {
		slices.Sort(lat)
		b.ReportMetric(float64(len(lat))/el.Seconds(), "pairs/s")
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
}
