package redislock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/internal/backendkit"
)

var _ driver.ManyAcquirer = (*Backend)(nil)

// AcquireMany implements lockx.ManyAcquirer: one all-or-nothing attempt at
// every request, for one owner, without waiting.
//
// On a single node or a Sentinel primary it is one script call over every
// key (acquire_many.lua), so one round trip, batched with the backend's other
// calls like any script call. A Lua script may touch only keys of one Cluster
// slot, so on a Cluster (and on any other client that routes by key) the keys
// are grouped by hash tag — each lock's tag is its user key, so keys group
// only when their names share a tag themselves, as "{order:1}:pay" and
// "{order:1}:ship" do — and one script per group goes out in one pipeline,
// which go-redis sends to each node in parallel: one round trip per node. If
// some group is refused, the groups that were granted are released again
// (one more round trip per node, owner-checked) before it returns, so the set
// stays all or nothing.
//
// With WithReplicaAck it makes no call and reports the set as not taken
// (every Result with Acquired false and TTL 0): the Client then takes the
// keys one by one, each grant acknowledged by the replicas.
func (b *Backend) AcquireMany(ctx context.Context, reqs []driver.Request) ([]driver.Result, error) {
	if b.err != nil {
		return nil, b.err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res := make([]driver.Result, len(reqs))
	if len(reqs) == 0 || b.cfg.replicas > 0 {
		return res, nil
	}
	if err := driver.CheckManyRequests(reqs); err != nil {
		return nil, err
	}
	owner := encodeOwner(reqs[0].Owner)
	groups := b.groupByTag(reqs)
	cmds := make([]*redis.Cmd, len(groups))
	if len(groups) == 1 {
		cmds[0] = b.runScript(ctx, acquireManyScript, manyArgs(b, reqs, groups[0], owner))
	} else {
		args := make([][]any, len(groups))
		for g, idx := range groups {
			args[g] = manyArgs(b, reqs, idx, owner)
		}
		b.pipeScripts(ctx, acquireManyScript, args, cmds)
	}

	granted := make([]bool, len(groups))
	refused := false
	var errs []error
	for g, idx := range groups {
		vs, err := cmds[g].Int64Slice()
		if err == nil && len(vs) != len(idx) {
			err = fmt.Errorf("redislock: acquire many: %d replies for %d keys", len(vs), len(idx))
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		granted[g] = vs[0] > 0
		for j, i := range idx {
			switch v := vs[j]; {
			case v > 0:
				res[i] = driver.Result{Acquired: true, Token: driver.Token(v), TTL: reqs[i].Lease}
			case v < 0:
				res[i].TTL = time.Duration(-1-v) * time.Millisecond
			}
		}
		refused = refused || !granted[g]
	}
	if len(errs) > 0 {
		// Unknown outcome: the Client releases every key, owner-checked.
		return nil, backendkit.Fail(ctx, "acquire many", errors.Join(errs...))
	}
	if !refused {
		return res, nil
	}
	// Some group was refused: give back the groups that were granted.
	var back []int
	for g, idx := range groups {
		if granted[g] {
			back = append(back, idx...)
		}
	}
	for _, i := range back {
		res[i].Acquired, res[i].Token, res[i].TTL = false, 0, 0
	}
	if len(back) > 0 {
		if err := b.releaseKeys(ctx, reqs, back, owner); err != nil {
			return nil, backendkit.Fail(ctx, "acquire many: give back", err)
		}
	}
	return res, nil
}

// groupByTag returns the indexes of reqs grouped so that each group can run
// as one script: everything in one group on a client that does not route by
// key, else one group per hash tag, in order of first appearance.
func (b *Backend) groupByTag(reqs []driver.Request) [][]int {
	if !b.routed {
		return oneGroup(len(reqs))
	}
	return groupBy(len(reqs), func(i int) string { return hashTag(b.lockKey(reqs[i].Key)) })
}

// groupBy returns the indexes 0..n-1 grouped by key(i), groups in order of
// first appearance.
func groupBy[K comparable](n int, key func(i int) K) [][]int {
	var groups [][]int
	at := make(map[K]int)
	for i := range n {
		k := key(i)
		g, ok := at[k]
		if !ok {
			g = len(groups)
			at[k] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

// oneGroup is groupBy's result when every index shares one key: 0..n-1 in
// one group (none when n is 0), without groupBy's map.
func oneGroup(n int) [][]int {
	if n == 0 {
		return nil
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	return [][]int{all}
}

// manyArgs is the argument vector of acquire_many.lua for reqs[idx...]:
// "evalsha", sha, numkeys, the lock key of each request (the script derives
// the queue keys, as acquire.lua does), owner, leases. The key names share
// one buffer and go in, like the leases, as pointers (go-redis writes
// *string and *int64 as their values), so a set costs a few allocations
// rather than several per key; the first key goes in as a string, which
// routing by key needs.
func manyArgs(b *Backend, reqs []driver.Request, idx []int, owner string) []any {
	p := b.cfg.prefix
	size := 0
	for _, i := range idx {
		size += len(p) + len(reqs[i].Key) + len("#{#}")
	}
	bs := make([]byte, 0, size)
	names := make([]string, len(idx))
	ms := make([]int64, len(idx))
	for j, i := range idx {
		at := len(bs)
		bs = appendBase(bs, p, reqs[i].Key)
		// The bytes are never written again: strings over them are immutable.
		names[j] = unsafe.String(unsafe.SliceData(bs[at:]), len(bs)-at)
		ms[j] = millis(reqs[i].Lease)
		bs = bs[len(bs):] // the next key starts a fresh region of the buffer
	}
	args := make([]any, 0, 4+2*len(idx))
	args = append(args, "evalsha", acquireManyScript.sha, len(idx), names[0])
	for k := 1; k < len(names); k++ {
		args = append(args, &names[k])
	}
	args = append(args, owner)
	if !slices.ContainsFunc(ms, func(v int64) bool { return v != ms[0] }) {
		return append(args, &ms[0]) // one lease for every key
	}
	for j := range ms {
		args = append(args, &ms[j])
	}
	return args
}

// releaseKeys releases reqs[idx...] from owner (encoded) in one pipeline,
// bounded by a second past ctx's cancellation.
func (b *Backend) releaseKeys(ctx context.Context, reqs []driver.Request, idx []int, owner string) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	keys := make([]string, len(idx))
	for j, i := range idx {
		keys[j] = reqs[i].Key
	}
	var errs []error
	for _, err := range b.releasePipe(rctx, keys, owner) {
		if err != nil && !errors.Is(err, driver.ErrNotHeld) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

var _ driver.ManyReleaser = (*Backend)(nil)

// ReleaseMany implements lockx.ManyReleaser: the release script of every
// key in one pipeline (go-redis splits a Cluster's per master node), with
// one error per key as Release returns it.
func (b *Backend) ReleaseMany(ctx context.Context, keys []string, owner driver.Owner) []error {
	errs := make([]error, len(keys))
	err := b.err
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	return b.releasePipe(ctx, keys, encodeOwner(owner))
}

// releasePipe runs the release script for each key and the encoded owner in
// one pipeline.
func (b *Backend) releasePipe(ctx context.Context, keys []string, owner string) []error {
	args := make([][]any, len(keys))
	for i, k := range keys {
		lk := b.lockKey(k)
		b.n.forget(lk, owner) // a handoff to owner is freed by this call
		args[i] = []any{"evalsha", releaseScript.sha, 1, lk, owner, b.tombArg, b.chpfArg}
	}
	cmds := make([]*redis.Cmd, len(keys))
	b.pipeScripts(ctx, releaseScript, args, cmds)
	errs := make([]error, len(keys))
	for i, c := range cmds {
		switch v, err := c.Int64(); {
		case err != nil:
			errs[i] = backendkit.Fail(ctx, "release", err)
		case v != 1:
			errs[i] = driver.ErrNotHeld
		}
	}
	return errs
}

// pipeScripts runs s once per argument vector (each "evalsha", sha,
// numkeys, keys..., args...) in one pipeline of rdb (split per node on a
// Cluster): as functions of the library where the server has them (see
// runScript), and as scripts for the calls that could not run as one —
// EVALSHA, then once more with EVAL for those that met NOSCRIPT; cmds gets
// the final command of each.
func (b *Backend) pipeScripts(ctx context.Context, s *script, args [][]any, cmds []*redis.Cmd) {
	pending := make([]int, len(args))
	for i := range pending {
		pending[i] = i
	}
	if s.fn != nil && b.fcall.Load() {
		pending = b.pipeFunctions(ctx, s, args, cmds, pending)
	}
	for _, sha := range [2]bool{true, false} {
		if len(pending) == 0 {
			return
		}
		if sha {
			pipePass(ctx, b.rdb, "evalsha", s.sha, args, cmds, pending)
		} else {
			pipePass(ctx, b.rdb, "eval", s.src, args, cmds, pending)
		}
		retry := pending[:0]
		for _, i := range pending {
			if sha && isNoScript(cmds[i].Err()) {
				retry = append(retry, i)
			}
		}
		pending = retry
	}
}

// pipeFunctions calls s's function for args[i], i in pending, in one
// pipeline, loading the library where a node lacks it and calling again
// there, and returns the indexes that must run as scripts instead.
func (b *Backend) pipeFunctions(ctx context.Context, s *script, args [][]any, cmds []*redis.Cmd, pending []int) []int {
	var scripts []int
	for loaded := false; len(pending) > 0; loaded = true {
		pipePass(ctx, b.rdb, "fcall", s.fn, args, cmds, pending)
		var load []int
		for _, i := range pending {
			switch b.afterFcall(cmds[i].Err(), loaded) {
			case fcallLoad:
				load = append(load, i)
			case fcallScript:
				scripts = append(scripts, i)
			}
		}
		// Load the library once per node that lacked it, and call again
		// there.
		done := map[string]error{}
		pending = nil
		for _, i := range load {
			key, _ := argKey(args[i], 3)
			node, addr, err := b.libraryNode(ctx, key)
			if err == nil {
				var seen bool
				if err, seen = done[addr]; !seen {
					err = b.loadLibraryOn(ctx, node)
					done[addr] = err
				}
			}
			if err != nil {
				scripts = append(scripts, i)
			} else {
				pending = append(pending, i)
			}
		}
	}
	return append(scripts, pending...)
}

// pipePass sends verb (fcall, evalsha or eval) with name (a function name,
// digest or text) and args[i] for each i in idx in one pipeline of rdb.
func pipePass(ctx context.Context, rdb redis.UniversalClient, verb string, name any, args [][]any, cmds []*redis.Cmd, idx []int) {
	pipe := rdb.Pipeline()
	for _, i := range idx {
		a := args[i]
		a[0], a[1] = verb, name
		cmds[i] = redis.NewCmd(ctx, a...)
		cmds[i].SetFirstKeyPos(3)
		_ = pipe.Process(ctx, cmds[i])
	}
	_, _ = pipe.Exec(ctx)
}
