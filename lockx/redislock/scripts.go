package redislock

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"errors"
	"strings"
	"sync"
	"unsafe"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/redis/go-redis/v9"
)

// The scripts run with EVALSHA and fall back to EVAL on NOSCRIPT (after a
// SCRIPT FLUSH, a restart or a failover to a node that never saw them), so the
// text crosses the wire only then. Every key a script touches shares the
// lock's hash tag, so each script runs on one Cluster node, and is passed in
// KEYS — except in acquire.lua, release.lua and acquire_many.lua, which get
// lock keys alone and append the queue suffixes themselves (a declared key costs the
// server ~0.3 µs a call; docs/architecture.md, "Scripts"). User input
// reaches the scripts only through KEYS and ARGV.
//
// The scripts of the plain lock (acquire, release, pass, extend, TTL, the
// wake-up pass-on and AcquireMany) are also one Redis function library
// (Redis 7.0 and later; see library below), called with FCALL where the
// server has functions: its helpers are defined once, when the library
// loads, instead of on every call, and read and write the fencing token
// with Redis's struct library. Both run the same .lua text and so behave
// the same.
//
//go:embed scripts/*.lua
var scriptFS embed.FS

var (
	acquireScript = loadScript("token.lua", "queue.lua", "acquire.lua")
	releaseScript = loadScript("token.lua", "queue.lua", "release.lua")
	passScript    = loadScript("token.lua", "queue.lua", "pass.lua")
	wakeScript    = loadScript("token.lua", "queue.lua", "wake_next.lua")
	extendScript  = loadScript("extend.lua")
	ttlScript     = loadScript("ttl.lua")
	// acquireManyScript is AcquireMany's all-or-nothing attempt (many.go).
	acquireManyScript = loadScript("token.lua", "queue.lua", "acquire_many.lua")

	// library holds the scripts above as functions (FCALL).
	library = newLibrary([]string{"token_struct.lua", "queue.lua"},
		acquireScript, releaseScript.allowOOM(), passScript, wakeScript, extendScript.allowOOM(), ttlScript.allowOOM(), acquireManyScript)
)

// script is a Lua script with its digest and text boxed once for the
// argument vector, and the name of its function in the library (nil if it
// has none).
type script struct {
	*redis.Script
	sha, src any
	fn       any
	body     string // the last file: the script's own code, without helpers
	// oom: the function may run while Redis is above maxmemory. A script
	// without flags may (only its writes that grow memory fail there); a
	// function without flags is refused before it runs. Release, extend and
	// TTL keep the scripts' behaviour: renewals and releases go on.
	oom bool
}

// allowOOM marks s's function allow-oom (see script.oom) and returns s.
func (s *script) allowOOM() *script {
	s.oom = true
	return s
}

// loadScript concatenates the named files and drops comment-only and blank
// lines: the comments are for readers of the .lua files, not for the wire.
func loadScript(names ...string) *script {
	src := readScripts(names...)
	rs := redis.NewScript(src)
	return &script{Script: rs, sha: rs.Hash(), src: src, body: names[len(names)-1]}
}

// readScripts is the text of the named files, as loadScript sends it.
func readScripts(names ...string) string {
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
	return b.String()
}

// newLibrary builds the function library of scripts: the helper files
// once, then each script's own file (its last) as the body of a function
// that takes KEYS and ARGV as its parameters, so the text is the script's.
// The library's name, and so each function's, carries a digest of its text:
// Backends of different lockx versions on one server load libraries of
// their own instead of replacing each other's.
func newLibrary(helpers []string, scripts ...*script) string {
	code := readScripts(helpers...)
	bodies := make([]string, len(scripts))
	h := sha1.New()
	h.Write([]byte(code))
	for i, s := range scripts {
		bodies[i] = readScripts(s.body)
		h.Write([]byte(s.body))
		h.Write([]byte(bodies[i]))
		if s.oom {
			h.Write([]byte("allow-oom"))
		}
	}
	name := "lockx_" + hex.EncodeToString(h.Sum(nil)[:8])
	var b strings.Builder
	b.WriteString("#!lua name=" + name + "\n" + code)
	for i, s := range scripts {
		fn := name + "_" + strings.TrimSuffix(s.body, ".lua")
		s.fn = fn
		flags := ""
		if s.oom {
			flags = ", flags = {'allow-oom'}"
		}
		b.WriteString("redis.register_function{function_name = '" + fn + "', callback = function(KEYS, ARGV)\n" + bodies[i] + "end" + flags + "}\n")
	}
	return b.String()
}

// processor runs one command: a redis.UniversalClient or a batcher.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// nodeBatched batches the commands of a Cluster per master node: each goes
// through the batcher of the node that owns its slot, in pipelines of that
// node's client. The Cluster client's autopipeliner keeps one ordered
// stream (batches run one after another in submit order), so one stalled
// node holds up the calls to every other node; node by node, a stall stays
// on its node. A reply that redirects (MOVED, ASK: slots moving, a
// failover) sends the command again through the Cluster client, which
// follows redirects.
type nodeBatched struct {
	cc    *redis.ClusterClient
	nodes sync.Map // *redis.Client (a node) → *batcher
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
	bt, ok := n.nodes.Load(node)
	if !ok {
		bt, _ = n.nodes.LoadOrStore(node, &batcher{pipe: node.Pipeline, one: node.Process})
	}
	err = bt.(*batcher).Process(ctx, cmd)
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
// of KEYS for a script or function call with keys, else the first argument
// (HGET and the like). ok is false when there is none to route by.
func firstKey(cmd redis.Cmder) (key string, ok bool) {
	args := cmd.Args()
	pos := 1
	switch cmd.Name() {
	case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
		if len(args) < 4 || args[2] == "0" || args[2] == 0 || args[2] == int64(0) {
			return "", false
		}
		pos = 3
	}
	return argKey(args, pos)
}

// argKey returns args[pos] if it is a key (a string or *string).
func argKey(args []any, pos int) (key string, ok bool) {
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
// lock key name and the encoded owner are built in buf. Only on clients that
// route by key (Cluster) does the first key go in as a string, because
// routing reads it as one.
type call struct {
	args     [12]any
	lk       string
	owner    string // encoded (see appendOwner)
	ms, qttl int64  // lease (or tombstone) and queue TTL in ms
	buf      [160]byte
}

// newCall returns a call with the lock key name of key (see keys), the
// encoded owner and the first key argument set. The scripts that need the
// queue keys derive them from the lock key (queueKeys).
func (b *Backend) newCall(key string, owner driver.Owner) *call {
	c := &call{}
	p := b.cfg.prefix
	size := len(p) + len(key) + len("#{#}") + len(owner) + 2
	bs := c.buf[:0]
	if size > len(c.buf) {
		bs = make([]byte, 0, size)
	}
	bs = appendBase(bs, p, key)
	n := len(bs)
	bs = appendOwner(bs, owner)
	// The bytes are never written again: strings over them are immutable.
	s := unsafe.String(unsafe.SliceData(bs), len(bs))
	c.lk, c.owner = s[:n], s[n:]
	if b.routed {
		c.args[3] = c.lk
	} else {
		c.args[3] = &c.lk
	}
	return c
}

// eval runs s with c.args[:n] ("evalsha", sha, numkeys, keys..., args...)
// filled from index 2 on (see runScript).
func (b *Backend) eval(ctx context.Context, s *script, c *call, n int) (int64, error) {
	return b.runScript(ctx, s, c.args[:n]).Int64()
}

// runScript runs s with args ("evalsha", sha, numkeys, keys..., args...;
// the first two are set here) through b.run and returns the command: as a
// function of the library where the server has them (loading the library
// first where it lacks it), else with EVALSHA, falling back to EVAL on
// NOSCRIPT.
func (b *Backend) runScript(ctx context.Context, s *script, args []any) *redis.Cmd {
	if s.fn != nil && b.fcall.Load() {
		for loaded := false; ; loaded = true {
			args[0], args[1] = "fcall", s.fn
			cmd := redis.NewCmd(ctx, args...)
			cmd.SetFirstKeyPos(3)
			_ = b.run.Process(ctx, cmd)
			next := b.afterFcall(cmd.Err(), loaded)
			if next == fcallDone {
				return cmd
			}
			if next == fcallLoad {
				key, _ := argKey(args, 3)
				if b.loadLibrary(ctx, key) == nil {
					continue
				}
			}
			break // as a script
		}
	}
	args[0], args[1] = "evalsha", s.sha
	cmd := redis.NewCmd(ctx, args...)
	cmd.SetFirstKeyPos(3)
	_ = b.run.Process(ctx, cmd)
	if isNoScript(cmd.Err()) {
		args[0], args[1] = "eval", s.src
		cmd = redis.NewCmd(ctx, args...)
		cmd.SetFirstKeyPos(3)
		_ = b.run.Process(ctx, cmd)
	}
	return cmd
}

// What follows an FCALL of the library (afterFcall).
const (
	fcallDone   = iota // the reply, or its error, is the call's own outcome
	fcallLoad          // the node lacks the library: load it and call again
	fcallScript        // run the call as a script instead
)

// afterFcall decides what follows an FCALL whose error was err; loaded
// reports that the library was loaded for this call already. A server
// without functions (Redis before 7.0, miniredis) or that may not run them
// for this user turns functions off for the Backend: every later call is a
// script. A server without the library (a new node, FUNCTION FLUSH, a
// restart without persistence, a failover to a replica that never had it)
// gets it loaded — on the node of the call's key — and the call goes again,
// once; if that does not help, the call runs as a script. Any other error
// is the call's own. runScript and pipeFunctions both decide by it.
func (b *Backend) afterFcall(err error, loaded bool) int {
	switch {
	case err == nil, !noFunctions(err) && !redis.HasErrorPrefix(err, "Function not found"):
		return fcallDone
	case noFunctions(err):
		b.fcall.Store(false)
		return fcallScript
	case loaded:
		return fcallScript
	}
	return fcallLoad
}

// noFunctions reports an error that says the server has no functions for
// this client: no FCALL or FUNCTION command, or no permission for them.
func noFunctions(err error) bool {
	return redis.HasErrorPrefix(err, "unknown command") || redis.HasErrorPrefix(err, "unknown subcommand") ||
		redis.HasErrorPrefix(err, "NOPERM")
}

// loadLibrary loads the function library on the node that serves key (the
// client's node unless it routes by key). A library of that name already
// there (loaded by another Backend meanwhile) is the same text: success. A
// server that has no functions for this client, or refuses the library,
// turns functions off for the Backend.
func (b *Backend) loadLibrary(ctx context.Context, key string) error {
	node, _, err := b.libraryNode(ctx, key)
	if err != nil {
		return err
	}
	return b.loadLibraryOn(ctx, node)
}

// loadLibraryOn is loadLibrary on node.
func (b *Backend) loadLibraryOn(ctx context.Context, node redis.Cmdable) error {
	err := node.FunctionLoad(ctx, library).Err()
	if err != nil && redis.HasErrorPrefix(err, "Library") && strings.Contains(err.Error(), "already exists") {
		return nil
	}
	if err != nil && (noFunctions(err) || redis.HasErrorPrefix(err, "Error registering")) {
		b.fcall.Store(false)
	}
	return err
}

// libraryNode returns the client of the node that serves key and its
// address: on a Cluster the key's master, else the client itself (address
// "").
func (b *Backend) libraryNode(ctx context.Context, key string) (redis.Cmdable, string, error) {
	if cc, ok := b.rdb.(*redis.ClusterClient); ok {
		node, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return nil, "", err
		}
		return node, node.Options().Addr, nil
	}
	return b.rdb, "", nil
}

// isNoScript reports a NOSCRIPT reply (go-redis's ErrNoScript is one too).
// The nil check first keeps the hot path free of HasErrorPrefix's
// allocation.
func isNoScript(err error) bool { return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") }
