package redislock

import (
	"context"
	"embed"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/lockx"
)

// The scripts run with EVALSHA and fall back to EVAL on NOSCRIPT (after a
// SCRIPT FLUSH, a restart or a failover to a node that never saw them), so the
// text crosses the wire only then. Every key a script touches is passed in
// KEYS and shares the lock's hash tag, so each script runs on one Cluster
// node; user input reaches the scripts only through KEYS and ARGV.
//
//go:embed scripts/*.lua
var scriptFS embed.FS

var (
	acquireScript = loadScript("queue.lua", "acquire.lua")
	releaseScript = loadScript("queue.lua", "release.lua")
	wakeScript    = loadScript("queue.lua", "wake_next.lua")
	extendScript  = loadScript("extend.lua")
	ttlScript     = loadScript("ttl.lua")
	// acquireManyScript is AcquireMany's all-or-nothing attempt (many.go).
	acquireManyScript = loadScript("queue.lua", "acquire_many.lua")
)

// script is a Lua script with its digest and text boxed once for the
// argument vector.
type script struct {
	*redis.Script
	sha, src any
}

// loadScript concatenates the named files and drops comment-only and blank
// lines: the comments are for readers of the .lua files, not for the wire.
func loadScript(names ...string) *script {
	var b strings.Builder
	for _, name := range names {
		src, err := scriptFS.ReadFile("scripts/" + name)
		if err != nil {
			panic("redislock: missing embedded script " + name) // a build defect, not input
		}
		for line := range strings.SplitSeq(string(src), "\n") {
			t := strings.TrimSpace(line)
			if t == "" || strings.HasPrefix(t, "--") {
				continue
			}
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	rs := redis.NewScript(b.String())
	return &script{Script: rs, sha: rs.Hash(), src: b.String()}
}

// processor runs one command: a redis.UniversalClient, the client's
// autopipeliner or a hybrid of both.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// hybrid sends a command straight to the client while no other command of
// the backend is in flight, for the latency of a lone round trip, and
// through the autopipeliner while others are, so that concurrent commands
// share round trips.
type hybrid struct {
	direct, batched processor
	inflight        atomic.Int64
}

func (h *hybrid) Process(ctx context.Context, cmd redis.Cmder) error {
	defer h.inflight.Add(-1)
	if h.inflight.Add(1) == 1 {
		return h.direct.Process(ctx, cmd)
	}
	return h.batched.Process(ctx, cmd)
}

// nodeBatched batches the commands of a Cluster per master node: each goes
// through the autopipeliner of the node that owns its slot. The Cluster
// client's own autopipeliner keeps one ordered stream (batches run one
// after another in submit order), so one stalled node holds up the calls
// to every other node; node by node, a stall stays on its node. A reply
// that redirects (MOVED, ASK: slots moving, a failover) sends the command
// again through the Cluster client, which follows redirects.
type nodeBatched struct {
	cc  *redis.ClusterClient
	aps sync.Map // *redis.Client (a node) → *redis.AutoPipeliner
}

func (n *nodeBatched) Process(ctx context.Context, cmd redis.Cmder) error {
	key, ok := firstKey(cmd)
	if !ok {
		return n.cc.Process(ctx, cmd)
	}
	node, err := n.cc.MasterForKey(ctx, key)
	if err != nil {
		return n.cc.Process(ctx, cmd)
	}
	ap, ok := n.aps.Load(node)
	if !ok {
		a, err := node.AutoPipeline()
		if err != nil {
			return n.cc.Process(ctx, cmd)
		}
		ap, _ = n.aps.LoadOrStore(node, a)
	}
	err = ap.(*redis.AutoPipeliner).Process(ctx, cmd)
	var reply redis.Error
	switch {
	case err == nil:
	case redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK"):
		cmd.SetErr(nil)
		return n.cc.Process(ctx, cmd)
	case !errors.As(err, &reply) && ctx.Err() == nil:
		// The node did not answer (down, failed over): the outcome is
		// unknown and goes back to the caller as it is, but the next calls
		// should find the current topology.
		n.cc.ReloadState(ctx)
	}
	return err
}

// firstKey returns the key a command of this package routes by: the first
// of KEYS for a script call with keys, else the first argument (HGET and
// the like). ok is false when there is none to route by.
func firstKey(cmd redis.Cmder) (key string, ok bool) {
	args := cmd.Args()
	pos := 1
	switch cmd.Name() {
	case "eval", "evalsha", "eval_ro", "evalsha_ro":
		if len(args) < 4 || args[2] == "0" || args[2] == 0 || args[2] == int64(0) {
			return "", false
		}
		pos = 3
	}
	if len(args) <= pos {
		return "", false
	}
	switch k := args[pos].(type) {
	case string:
		return k, true
	case *string:
		return *k, true
	}
	return "", false
}

// call is the argument vector of one script invocation together with the
// values it points at, so that a call costs one allocation instead of one
// per boxed argument and one per key name: arguments go in as pointers into
// the call (go-redis writes *string and *int64 like their values), and the
// key names and the encoded owner are built in buf. Only on clients that
// route by key (Cluster) does the first key go in as a string, because
// routing reads it as one.
type call struct {
	args        [12]any
	lk, q, d, w string
	owner       string // encoded (see appendOwner)
	ms, qttl    int64  // lease (or tombstone) and queue TTL in ms
	buf         [160]byte
}

// newCall returns a call with the key names of key (see keys), the encoded
// owner and the first key argument set.
func (b *Backend) newCall(key string, owner lockx.Owner) *call {
	c := &call{}
	p := b.cfg.prefix
	size := 2*(len(p)+len(key)+len("#{#}")) + len(":qd:w") + len(owner) + 2
	bs := c.buf[:0]
	if size > len(c.buf) {
		bs = make([]byte, 0, size)
	}
	bs = appendBase(bs, p, key)
	n := len(bs)
	bs = append(bs, ":qd"...)
	bs = appendBase(bs, p, key)
	bs = append(bs, ":w"...)
	m := len(bs)
	bs = appendOwner(bs, owner)
	// The bytes are never written again: strings over them are immutable.
	s := unsafe.String(unsafe.SliceData(bs), len(bs))
	c.lk, c.q, c.d, c.w = s[:n], s[:n+2], s[:n+3], s[n+3:m]
	c.owner = s[m:]
	if b.routed {
		c.args[3] = c.lk
	} else {
		c.args[3] = &c.lk
	}
	return c
}

// eval runs s with c.args[:n] ("evalsha", sha, numkeys, keys..., args...)
// filled from index 2 on, falling back to EVAL on NOSCRIPT.
func eval(ctx context.Context, p processor, s *script, c *call, n int) (int64, error) {
	return runScript(ctx, p, s, c.args[:n]).Int64()
}

// runScript runs s with args ("evalsha", sha, numkeys, keys..., args...;
// the first two are set here) through p, falling back to EVAL on NOSCRIPT,
// and returns the command.
func runScript(ctx context.Context, p processor, s *script, args []any) *redis.Cmd {
	args[0], args[1] = "evalsha", s.sha
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(3)
	_ = p.Process(ctx, cmd)
	if isNoScript(cmd.Err()) {
		args[0], args[1] = "eval", s.src
		cmd = redis.NewCmd(ctx, args...)
		cmd.SetFirstKeyPos(3)
		_ = p.Process(ctx, cmd)
	}
	return cmd
}

// isNoScript reports a NOSCRIPT reply (go-redis's ErrNoScript is one too).
// The nil check first keeps the hot path free of HasErrorPrefix's
// allocation.
func isNoScript(err error) bool { return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") }
