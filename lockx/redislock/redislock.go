package redislock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/internal/backendkit"
)

// Backend is lockx's Redis backend over a redis.UniversalClient: a single
// node, a Sentinel failover client or a Cluster. It implements
// lockx.Backend, lockx.Notifier, lockx.BatchExtender,
// lockx.ExtendPartitioner, lockx.ManyAcquirer, lockx.ManyReleaser and
// driver.Passer (LocalFirst's local handoff, pass.go).
// Create it with New; it is safe for concurrent use.
type Backend struct {
	rdb redis.UniversalClient
	run processor // script calls: rdb, or a batcher over it
	// routed: rdb picks a node by key, so a call's first key must be a
	// string (anything but the plain and failover *redis.Client).
	routed bool
	cfg    config
	err    error  // invalid configuration, returned by every call
	id     string // random backend id: names this backend's wake-up channel
	chpf   string // cfg.prefix + "w:": the wake-up channel of backend X is chpf + X

	// fcall: call the scripts as functions of the library (scripts.go);
	// turned off for good by a server without functions.
	fcall atomic.Bool

	// Boxed once: converting a string or a number to an interface allocates,
	// and these go with calls on the hot path.
	idArg, chpfArg, tombArg any

	n notifier
}

var (
	_ driver.Backend           = (*Backend)(nil)
	_ driver.Notifier          = (*Backend)(nil)
	_ driver.BatchExtender     = (*Backend)(nil)
	_ driver.ExtendPartitioner = (*Backend)(nil)
)

// New returns a Backend that keeps its locks in rdb. It does not take
// ownership of rdb: Close leaves it open. An invalid option or a nil rdb is
// reported by every call as an *lockx.ArgError.
func New(rdb redis.UniversalClient, opts ...Option) *Backend {
	b := &Backend{rdb: rdb, cfg: defaultConfig()}
	for _, o := range opts {
		if o != nil {
			o(&b.cfg)
		}
	}
	b.err = b.cfg.err
	if rdb == nil && b.err == nil {
		b.err = &driver.ArgError{Arg: "redis client", Reason: "nil"}
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	b.id = hex.EncodeToString(id[:])
	b.chpf = b.cfg.prefix + "w:"
	b.idArg, b.chpfArg, b.tombArg = b.id, b.chpf, millis(b.cfg.tombstone)
	b.run = rdb
	b.fcall.Store(true)
	_, plain := rdb.(*redis.Client)
	b.routed = !plain
	if b.err == nil && b.cfg.autoPipeline {
		if cc, ok := rdb.(*redis.ClusterClient); ok {
			// A batcher per master node (scripts.go: nodeBatched).
			b.run = &nodeBatched{cc: cc}
		} else {
			b.run = &batcher{pipe: rdb.Pipeline, one: rdb.Process}
		}
	}
	b.n.init(b)
	return b
}

// keys returns the names of key's lock and of its fair queue (order and
// data) and waiter-marks keys: "<prefix>{<key>}" and that with ":q", ":qd"
// and ":w" appended. All four share one hash tag, the user key in braces. A
// user key may contain braces itself; Redis takes the tag from the first '{'
// (ours, as the prefix has none) to the next '}', which is inside or right
// after the key, so the suffixes never change the tag. Only a key starting
// with '}' (or the empty key, which lockx never sends) would give an empty
// tag, and so no tag at all; such keys use the fixed tag "#" instead:
// "<prefix>#{#}<key>".
func (b *Backend) keys(key string) (lk, q, d, w string) {
	lk = b.lockKey(key)
	q, d, w = queueKeys(lk)
	return lk, q, d, w
}

// queueKeys returns the names of the fair queue (order and data) and of the
// waiter marks of the lock named lk (see keys). acquire.lua, release.lua and
// acquire_many.lua, which get lk alone, append the same suffixes.
func queueKeys(lk string) (q, d, w string) {
	return lk + ":q", lk + ":qd", lk + ":w"
}

// appendBase appends the lock key name of key (see keys).
func appendBase(bs []byte, prefix, key string) []byte {
	bs = append(bs, prefix...)
	if len(key) == 0 || key[0] == '}' {
		bs = append(bs, "#{#}"...)
		return append(bs, key...)
	}
	bs = append(bs, '{')
	bs = append(bs, key...)
	return append(bs, '}')
}

// lockKey returns the name of key's lock.
func (b *Backend) lockKey(key string) string {
	return string(appendBase(make([]byte, 0, len(b.cfg.prefix)+len(key)+4), b.cfg.prefix, key))
}

// flagArgs are the pre-boxed flags argument of acquire.lua: 1 fair, 2 wait,
// 4 other waiters of this backend wait for the key too, 8 the token from the
// clock (config.clockTokens).
var flagArgs = func() (a [16]any) {
	for i := range a {
		a[i] = strconv.Itoa(i)
	}
	return a
}()

// Acquire implements lockx.Backend with one script call (plus WAIT in the
// same pipeline when WithReplicaAck is set).
func (b *Backend) Acquire(ctx context.Context, req driver.Request) (driver.Result, error) {
	if b.err != nil {
		return driver.Result{}, b.err
	}
	if err := ctx.Err(); err != nil {
		return driver.Result{}, err
	}
	// Every waiting attempt queues: a release hands the lock to the next in
	// line (handoff.go), with or without lockx.Fair (but on a Quorum's
	// nodes, config.racing). A try does not queue.
	fair := req.Fair || (req.Wait && !b.cfg.racing)
	flags := 0
	if fair {
		flags |= 1
	}
	if req.Wait {
		flags |= 2
	}
	if b.cfg.clockTokens {
		flags |= 8
	}
	qttl := req.QueueTTL
	if qttl <= 0 {
		qttl = b.cfg.queueTTL
	}
	c := b.newCall(req.Key, req.Owner)
	// A fair waiter of this backend may have been handed the lock by a
	// release already (handoff.go). Not with WithReplicaAck: that grant must
	// be acknowledged, so it goes through the server (idempotently).
	fairWait := fair && req.Wait && b.cfg.replicas == 0
	if fairWait {
		if res, ok := b.n.takeHandoff(c.lk, c.owner, req.Lease, req.Renewed); ok {
			return res, nil
		}
	}
	var epoch uint64 // non-zero: the refusal may promise the wake-ups to a later Watch
	if fairWait {
		epoch = b.n.queued()
	}
	sent := time.Now()
	if req.Wait && !fair && b.n.othersWaiting(c.lk, req.Owner) {
		flags |= 4
	}
	c.ms, c.qttl = millis(req.Lease), millis(qttl)
	// The lock's key alone: the script derives the queue keys (acquire.lua).
	c.args[2], c.args[4], c.args[5], c.args[6], c.args[7], c.args[8] = "1", &c.owner, &c.ms, flagArgs[flags], &c.qttl, b.idArg
	n := 7 // the queue TTL and backend id matter only to a waiter
	if req.Wait {
		n = 9
	}
	var v int64
	var err error
	if b.cfg.replicas > 0 {
		v, err = b.acked(ctx, acquireScript, req.Key, req.Owner, c, n)
	} else {
		v, err = b.eval(ctx, acquireScript, c, n)
	}
	if err != nil {
		return driver.Result{}, backendkit.Fail(ctx, "acquire", err)
	}
	if v > 0 {
		if fairWait {
			b.n.forget(c.lk, c.owner)
		}
		return driver.Result{Acquired: true, Token: driver.Token(v), TTL: req.Lease}, nil
	}
	if fairWait {
		b.n.refused(c.lk, c.owner, sent, req.Lease, qttl, epoch)
	}
	// A fair waiter's refusal queued it, and the release that reaches it
	// publishes to this backend's channel, confirmed before the attempt was
	// sent; a message that beats the reply, or a subscription lost since,
	// fires the Watch at once (notifier.caughtUp).
	return driver.Result{TTL: time.Duration(-1-v) * time.Millisecond, Queued: epoch != 0}, nil
}

// acked runs the script s, a grant to owner of key (acquire or pass), and
// WAIT in one pipeline on the connection to the key's primary, and releases
// a grant that too few replicas acknowledged.
func (b *Backend) acked(ctx context.Context, s *script, key string, owner driver.Owner, c *call, n int) (int64, error) {
	var pipe redis.Pipeliner
	if cc, ok := b.rdb.(*redis.ClusterClient); ok {
		node, err := cc.MasterForKey(ctx, c.lk)
		if err != nil {
			return 0, err
		}
		pipe = node.Pipeline()
	} else {
		pipe = b.rdb.Pipeline()
	}
	var res, acked *redis.Cmd
	for _, text := range [2]any{s.sha, s.src} {
		c.args[0], c.args[1] = "evalsha", text
		if text == s.src {
			c.args[0] = "eval"
		}
		res = redis.NewCmd(ctx, c.args[:n]...)
		res.SetFirstKeyPos(3)
		_ = pipe.Process(ctx, res)
		acked = pipe.Do(ctx, "wait", b.cfg.replicas, b.cfg.ackTimeout.Milliseconds())
		_, _ = pipe.Exec(ctx)
		if !isNoScript(res.Err()) {
			break
		}
	}
	v, err := res.Int64()
	if err != nil || v <= 0 {
		return v, err
	}
	got, err := acked.Int64()
	if err == nil && got >= int64(b.cfg.replicas) {
		return v, nil
	}
	// Not acknowledged: take the grant back (owner-checked) and fail closed.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_ = b.Release(rctx, key, owner)
	if err != nil {
		return 0, fmt.Errorf("redislock: replica acknowledgement: %w", err)
	}
	return 0, fmt.Errorf("redislock: grant acknowledged by %d of %d replicas within %v", got, b.cfg.replicas, b.cfg.ackTimeout)
}

// Extend implements lockx.Backend.
func (b *Backend) Extend(ctx context.Context, key string, owner driver.Owner, lease time.Duration) error {
	if b.err != nil {
		return b.err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c := b.newCall(key, owner)
	c.ms = millis(lease)
	c.args[2], c.args[4], c.args[5] = "1", &c.owner, &c.ms
	v, err := b.eval(ctx, extendScript, c, 6)
	if err != nil {
		return backendkit.Fail(ctx, "extend", err)
	}
	if v != 1 {
		return driver.ErrNotHeld
	}
	return nil
}

// Release implements lockx.Backend. It also wakes the next waiter: the head
// of the fair queue, or every backend that marked the key as awaited.
func (b *Backend) Release(ctx context.Context, key string, owner driver.Owner) error {
	if b.err != nil {
		return b.err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c := b.newCall(key, owner)
	b.n.forget(c.lk, c.owner) // a handoff to owner is freed by this call
	// The lock's key alone: the script derives the queue keys (release.lua).
	c.args[2], c.args[4], c.args[5], c.args[6] = "1", &c.owner, b.tombArg, b.chpfArg
	v, err := b.eval(ctx, releaseScript, c, 7)
	if err != nil {
		return backendkit.Fail(ctx, "release", err)
	}
	if v != 1 {
		return driver.ErrNotHeld
	}
	return nil
}

// TTL implements lockx.Backend.
func (b *Backend) TTL(ctx context.Context, key string, owner driver.Owner) (time.Duration, error) {
	if b.err != nil {
		return 0, b.err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	c := b.newCall(key, owner)
	c.args[2], c.args[4] = "1", &c.owner
	v, err := b.eval(ctx, ttlScript, c, 5)
	if err != nil {
		return 0, backendkit.Fail(ctx, "ttl", err)
	}
	if v < 0 {
		return 0, driver.ErrNotHeld
	}
	return time.Duration(v) * time.Millisecond, nil
}

// ExtendMany implements lockx.BatchExtender: one pipeline for all requests
// (go-redis splits it per node on a Cluster).
func (b *Backend) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []error {
	errs := make([]error, len(reqs))
	if len(reqs) == 0 {
		return errs
	}
	if b.err != nil {
		for i := range errs {
			errs[i] = b.err
		}
		return errs
	}
	args := make([][]any, len(reqs))
	for i, r := range reqs {
		args[i] = []any{nil, nil, 1, b.lockKey(r.Key), encodeOwner(r.Owner), millis(r.Lease)}
	}
	cmds := make([]*redis.Cmd, len(reqs))
	b.pipeScripts(ctx, extendScript, args, cmds)
	for i, cmd := range cmds {
		v, err := cmd.Int64()
		switch {
		case err != nil:
			errs[i] = backendkit.Fail(ctx, "extend", err)
		case v != 1:
			errs[i] = driver.ErrNotHeld
		}
	}
	return errs
}

// PartitionExtends implements lockx.ExtendPartitioner: on a Cluster, one
// group per master node (the node that owns the lock key's slot, from the
// client's cached slot table), so the watchdog renews each node's locks in
// a call of its own and a stalled node delays only its own locks. Requests
// whose node cannot be found form one more group. On a single node or a
// Sentinel failover client everything is one group: one pipeline, as
// before.
func (b *Backend) PartitionExtends(ctx context.Context, reqs []driver.ExtendRequest) [][]int {
	cc, ok := b.rdb.(*redis.ClusterClient)
	if !ok || b.err != nil {
		return oneGroup(len(reqs))
	}
	return groupBy(len(reqs), func(i int) *redis.Client {
		node, err := cc.MasterForKey(ctx, b.lockKey(reqs[i].Key))
		if err != nil {
			return nil // unknown: one group for all of them
		}
		return node
	})
}

// Close implements lockx.Backend: it closes the wake-up subscription and
// ends the goroutine that serves it. It does not close the redis client.
func (b *Backend) Close() error {
	b.n.close()
	return nil
}

// millis converts a lease to whole milliseconds, rounding up so that a
// positive duration never becomes zero (PEXPIRE 0 would delete the key).
func millis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
