package redislock_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/redislock"
)

// calls returns how many times the server ran cmd (INFO commandstats).
func calls(t *testing.T, ctx context.Context, rdb *redis.Client, cmd string) int {
	t.Helper()
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls=")
		if ok {
			n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			return n
		}
	}
	return 0
}

// lockxLibraries returns the names of the lockx function libraries loaded.
func lockxLibraries(t *testing.T, ctx context.Context, rdb *redis.Client) []string {
	t.Helper()
	libs, err := rdb.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: "lockx_*"}).Result()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range libs {
		names = append(names, l.Name)
	}
	return names
}

// On Redis 7 the plain lock's scripts run as functions of one library, loaded
// on first use and loaded again after FUNCTION FLUSH (as after a failover to
// a node that never had it), for single calls and pipelines alike; nothing
// falls back to EVALSHA.
func TestFunctionLibraryRecovery(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := clientAt(t, srv.Addr)
	b := backend(t, rdb)
	ctx := ctxT(t, 10*time.Second)
	a := lockx.NewOwner()
	for round := range 2 {
		flush := func() {
			t.Helper()
			if err := rdb.FunctionFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}
		flush()
		mustGrant(t, b, req("k", a, time.Second))
		if libs := lockxLibraries(t, ctx, rdb); len(libs) != 1 {
			t.Fatalf("round %d: lockx libraries after a grant: %v, want one", round, libs)
		}
		flush()
		if errs := b.ExtendMany(ctx, []driver.ExtendRequest{{Key: "k", Owner: a, Lease: time.Second}}); errs[0] != nil {
			t.Fatalf("round %d: ExtendMany after FUNCTION FLUSH: %v", round, errs[0])
		}
		flush()
		if err := b.Extend(ctx, "k", a, time.Second); err != nil {
			t.Fatalf("round %d: Extend after FUNCTION FLUSH: %v", round, err)
		}
		flush()
		if _, err := b.TTL(ctx, "k", a); err != nil {
			t.Fatalf("round %d: TTL after FUNCTION FLUSH: %v", round, err)
		}
		flush()
		if err := b.Release(ctx, "k", a); err != nil {
			t.Fatalf("round %d: Release after FUNCTION FLUSH: %v", round, err)
		}
		flush()
		reqs := []driver.Request{req("m1", a, time.Second), req("m2", a, time.Second)}
		res, err := b.AcquireMany(ctx, reqs)
		if err != nil || !res[0].Acquired || !res[1].Acquired {
			t.Fatalf("round %d: AcquireMany after FUNCTION FLUSH: %+v, %v", round, res, err)
		}
		for _, k := range []string{"m1", "m2"} {
			if err := b.Release(ctx, k, a); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := calls(t, ctx, rdb, "fcall"); n < 14 {
		t.Errorf("%d FCALLs, want at least 14 (7 operations a round)", n)
	}
	for _, cmd := range []string{"evalsha", "eval"} {
		if n := calls(t, ctx, rdb, cmd); n != 0 {
			t.Errorf("%d %s calls, want none (every operation has a function)", n, cmd)
		}
	}
}

// noFunctionsServer starts a redis-server and returns a client with every
// right and one whose user the ACL denies FCALL and FUNCTION.
func noFunctionsServer(t *testing.T, ctx context.Context) (admin, nofn *redis.Client) {
	t.Helper()
	srv := testenv.StartRedis(t)
	admin = clientAt(t, srv.Addr)
	if err := admin.Do(ctx, "acl", "setuser", "nofn", "on", "nopass", "~*", "&*", "+@all", "-fcall", "-function").Err(); err != nil {
		t.Fatal(err)
	}
	nofn = redis.NewClient(&redis.Options{Addr: srv.Addr, Username: "nofn", Password: "any", MaxRetries: -1})
	t.Cleanup(func() { _ = nofn.Close() })
	return admin, nofn
}

// A client that may not run functions (an ACL without FCALL and FUNCTION)
// gets the same locks from the scripts.
func TestFunctionsRefusedFallBackToScripts(t *testing.T) {
	ctx := ctxT(t, 10*time.Second)
	admin, rdb := noFunctionsServer(t, ctx)
	b := backend(t, rdb)
	a, x := lockx.NewOwner(), lockx.NewOwner()
	tok := mustGrant(t, b, req("k", a, time.Second))
	mustRefuse(t, b, req("k", x, time.Second))
	if err := b.Release(ctx, "k", a); err != nil {
		t.Fatal(err)
	}
	if got := mustGrant(t, b, req("k", x, time.Second)); got <= tok {
		t.Fatalf("token %d after release, want above %d", got, tok)
	}
	if n := calls(t, ctx, admin, "evalsha"); n < 4 {
		t.Fatalf("%d EVALSHA calls, want the operations as scripts", n)
	}
	if libs := lockxLibraries(t, ctx, admin); len(libs) != 0 {
		t.Fatalf("libraries %v loaded for a client without FUNCTION", libs)
	}
}

// The library's functions and the scripts are the same code: a lock taken
// through one is seen by the other (tokens, idempotent retry, refusal).
func TestFunctionsAndScriptsAgree(t *testing.T) {
	ctx := ctxT(t, 10*time.Second)
	admin, scripts := noFunctionsServer(t, ctx)
	prefix := redislock.WithPrefix(testPrefix())
	fb, sb := backend(t, admin, prefix), backend(t, scripts, prefix)
	a, x := lockx.NewOwner(), lockx.NewOwner()
	var last lockx.Token
	for i := range 20 {
		grant, other := fb, sb
		if i%2 == 1 {
			grant, other = sb, fb
		}
		tok := mustGrant(t, grant, req("k", a, time.Second))
		if tok <= last {
			t.Fatalf("grant %d: token %d not above %d", i, tok, last)
		}
		last = tok
		if again := mustGrant(t, other, req("k", a, time.Second)); again != tok {
			t.Fatalf("grant %d: retry through the other path got token %d, want %d", i, again, tok)
		}
		mustRefuse(t, other, req("k", x, time.Second))
		if err := other.Release(ctx, "k", a); err != nil {
			t.Fatalf("grant %d: release through the other path: %v", i, err)
		}
	}
	if calls(t, ctx, admin, "fcall") == 0 || calls(t, ctx, admin, "evalsha") == 0 {
		t.Fatal("want both paths used")
	}
}

// Above maxmemory the functions behave as the scripts do: a held lock is
// still renewed, read and released (a function without the allow-oom flag
// would be refused outright), and a new grant fails.
func TestFunctionsAboveMaxmemory(t *testing.T) {
	ctx := ctxT(t, 10*time.Second)
	admin, nofn := noFunctionsServer(t, ctx)
	prefix := redislock.WithPrefix(testPrefix())
	for name, b := range map[string]*redislock.Backend{"functions": backend(t, admin, prefix), "scripts": backend(t, nofn, prefix)} {
		a := lockx.NewOwner()
		mustGrant(t, b, req("k", a, time.Second))
		if err := admin.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
			t.Fatal(err)
		}
		if err := b.Extend(ctx, "k", a, time.Second); err != nil {
			t.Errorf("%s: Extend above maxmemory: %v", name, err)
		}
		if _, err := b.TTL(ctx, "k", a); err != nil {
			t.Errorf("%s: TTL above maxmemory: %v", name, err)
		}
		if errs := b.ExtendMany(ctx, []driver.ExtendRequest{{Key: "k", Owner: a, Lease: time.Second}}); errs[0] != nil {
			t.Errorf("%s: ExtendMany above maxmemory: %v", name, errs[0])
		}
		if _, err := b.Acquire(ctx, req("other", a, time.Second)); err == nil {
			t.Errorf("%s: a new grant above maxmemory succeeded", name)
		}
		// The script's release fails at its tombstone write (OOM); the
		// function, flagged allow-oom, releases.
		if err := b.Release(ctx, "k", a); err != nil && (name == "functions" || !strings.Contains(err.Error(), "OOM")) {
			t.Errorf("%s: Release above maxmemory: %v", name, err)
		}
		if err := admin.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
			t.Fatal(err)
		}
		_ = b.Release(ctx, "k", a)
	}
}

// On a Cluster every master gets the library from the first call that meets
// its absence there, through single calls and per-node pipelines alike.
func TestFunctionLibraryOnEveryClusterMaster(t *testing.T) {
	cc := clusterClient(t)
	ctx := ctxT(t, 20*time.Second)
	flush := func() {
		t.Helper()
		if err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.FunctionFlush(ctx).Err() }); err != nil {
			t.Fatal(err)
		}
	}
	b := backend(t, cc)
	a := lockx.NewOwner()
	keys := make([]string, 48) // spread over every master's slots
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	flush()
	for _, k := range keys {
		mustGrant(t, b, req(k, a, 5*time.Second))
	}
	flush()
	reqs := make([]driver.ExtendRequest, len(keys))
	for i, k := range keys {
		reqs[i] = driver.ExtendRequest{Key: k, Owner: a, Lease: 5 * time.Second}
	}
	for i, err := range b.ExtendMany(ctx, reqs) {
		if err != nil {
			t.Fatalf("ExtendMany after FUNCTION FLUSH on every master: key %s: %v", keys[i], err)
		}
	}
	if err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		libs, err := m.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: "lockx_*"}).Result()
		if err != nil {
			return err
		}
		if len(libs) != 1 {
			t.Errorf("master %s: lockx libraries %d, want 1", m.Options().Addr, len(libs))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if err := b.Release(ctx, k, a); err != nil {
			t.Fatalf("Release %s: %v", k, err)
		}
	}
}
