package redislock_test

import (
	"sync"
	"testing"
	"time"

	"github.com/lockx-go/lockx/internal/suitekit"
	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// gateWait is long enough for goroutines started before it to reach a
// LocalFirst gate, where they make no backend call.
const gateWait = 300 * time.Millisecond

// localChain starts n LocalFirst acquisitions of key on c while key is
// held through c, each releasing at once after it recorded its token, and
// returns once they wait at the gate; wait returns their tokens in grant
// order once they are all done.
func localChain(t *testing.T, c *lockx.Client, key string, n int) (wait func() []lockx.Token) {
	t.Helper()
	ctx := ctxT(t, 20*time.Second)
	var mu sync.Mutex
	var toks []lockx.Token
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			l, err := c.Acquire(ctx, key, lockx.LocalFirst())
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			toks = append(toks, l.Token())
			mu.Unlock()
			if err := l.Release(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	time.Sleep(gateWait)
	return func() []lockx.Token { wg.Wait(); return toks }
}

// TestLocalPassOneRoundTrip: with goroutines of one Client waiting at a
// LocalFirst gate, each handoff is one round trip to Redis (the pass
// script), where a release and an acquire took two, and every pass draws
// a larger token.
func TestLocalPassOneRoundTrip(t *testing.T) {
	rdb := clientAt(t, testenv.RedisAddr(t))
	hook := &countHook{}
	rdb.AddHook(hook)
	c := lockx.New(backend(t, rdb))
	defer c.Close()
	ctx := ctxT(t, 20*time.Second)
	first, err := c.Acquire(ctx, "pass", lockx.LocalFirst())
	if err != nil {
		t.Fatal(err)
	}
	const n = 5
	wait := localChain(t, c, "pass", n)
	before := hook.n.Load()
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	toks := wait()
	// n handoffs of one round trip each, and the last holder's release.
	if got := hook.n.Load() - before; got != n+1 {
		t.Errorf("%d round trips for %d local handoffs and a release, want %d", got, n, n+1)
	}
	prev := first.Token()
	for i, tok := range toks {
		if tok <= prev {
			t.Fatalf("grant %d: token %d after %d", i+1, tok, prev)
		}
		prev = tok
	}
}

// TestLocalPassYieldsToQueuedWaiter: a waiter of another process queued in
// Redis for the key is not jumped by a local pass; the local waiter is
// granted after it.
func TestLocalPassYieldsToQueuedWaiter(t *testing.T) {
	prefix := testPrefix()
	rdb := single(t)
	c := lockx.New(backend(t, rdb, redislock.WithPrefix(prefix)))
	defer c.Close()
	remote := lockx.New(backend(t, clientAt(t, testenv.RedisAddr(t)), redislock.WithPrefix(prefix)))
	defer remote.Close()
	ctx := ctxT(t, 20*time.Second)
	held, err := c.Acquire(ctx, "yield", lockx.LocalFirst())
	if err != nil {
		t.Fatal(err)
	}
	// The local waiter would take the key while the remote one holds it if it could.
	remoteTok := suitekit.HoldBriefly(ctx, t, remote, "yield", 20*time.Millisecond)
	suitekit.WaitFor(t, "the remote waiter queued in Redis", 5*time.Second, func() bool {
		return rdb.ZCard(ctx, prefix+"{yield}:q").Val() == 1
	})
	wait := localChain(t, c, "yield", 1)
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	rt := <-remoteTok
	local := wait()
	// Each grant's token is one past the last: their order is the grants'.
	if len(local) != 1 || !(held.Token() < rt && rt < local[0]) {
		t.Errorf("tokens: released %d, remote %d, local %v: want the queued remote waiter granted first", held.Token(), rt, local)
	}
}
