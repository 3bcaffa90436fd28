package redislock

import (
	"context"
	"fmt"
	"time"

	"github.com/lockx-go/lockx/lockx"
)

// Read/write locks (lockx.RWBackend). A read/write lock on key lives in four
// keys sharing key's hash tag, so every script runs on one Cluster node:
// prefix + "rw:{key}" (writer, token, marks), + ":r" (one lease per reader),
// + ":q" and + ":d" (the queue). See scripts/rw_lib.lua. Waiters are woken
// through the backend's wake-up channel with the lock key's name, so Watch
// on key serves them.
var (
	rwAcquireScript = loadScript("token.lua", "queue.lua", "pattern_queue.lua", "rw_lib.lua", "rw_acquire.lua")
	rwExtendScript  = loadScript("token.lua", "queue.lua", "pattern_queue.lua", "rw_lib.lua", "rw_extend.lua")
	rwReleaseScript = loadScript("token.lua", "queue.lua", "pattern_queue.lua", "rw_lib.lua", "rw_release.lua")
)

var _ lockx.RWBackend = (*Backend)(nil)

// patternKeys returns the four keys of a pattern (ns "rw:" or "s:") on key,
// tagged like the lock's keys (see keys).
func (b *Backend) patternKeys(ns, key string) []string {
	base := b.cfg.prefix + ns + "{" + key + "}"
	if len(key) > 0 && key[0] == '}' {
		base = b.cfg.prefix + ns + "#{#}" + key
	}
	return []string{base, base + ":r", base + ":q", base + ":d"}
}

func modeArg(mode lockx.RWMode) (string, error) {
	switch mode {
	case lockx.ModeRead:
		return "r", nil
	case lockx.ModeWrite:
		return "w", nil
	}
	return "", &lockx.ArgError{Arg: "mode", Reason: "neither read nor write"}
}

// AcquireRW implements lockx.RWBackend with one script call.
func (b *Backend) AcquireRW(ctx context.Context, mode lockx.RWMode, req lockx.Request) (lockx.Result, error) {
	if b.err != nil {
		return lockx.Result{}, b.err
	}
	m, err := modeArg(mode)
	if err != nil {
		return lockx.Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return lockx.Result{}, err
	}
	flags := 0
	if req.Fair {
		flags |= 1
	}
	if req.Wait {
		flags |= 2
	}
	qttl := req.QueueTTL
	if qttl <= 0 {
		qttl = b.cfg.queueTTL
	}
	v, err := rwAcquireScript.Run(ctx, b.rdb, b.patternKeys("rw:", req.Key),
		string(req.Owner), millis(req.Lease), m, flagArgs[flags], millis(qttl), b.idArg).Int64Slice()
	if err != nil {
		return lockx.Result{}, b.fail(ctx, "acquire "+mode.String(), err)
	}
	return verdict(v, req.Lease)
}

// verdict decodes a pattern acquire script's reply.
func verdict(v []int64, lease time.Duration) (lockx.Result, error) {
	switch {
	case len(v) == 2 && v[0] == 1:
		return lockx.Result{Acquired: true, Token: lockx.Token(v[1]), TTL: lease}, nil
	case len(v) == 2 && v[0] == 0:
		return lockx.Result{TTL: time.Duration(max(v[1], 0)) * time.Millisecond}, nil
	case len(v) == 1 && v[0] == 2:
		return lockx.Result{}, lockx.ErrUpgrade
	}
	return lockx.Result{}, lockx.Unavailable("acquire", fmt.Errorf("unexpected script reply %v", v))
}

// ExtendRW implements lockx.RWBackend.
func (b *Backend) ExtendRW(ctx context.Context, mode lockx.RWMode, key string, owner lockx.Owner, lease time.Duration) error {
	if b.err != nil {
		return b.err
	}
	m, err := modeArg(mode)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	v, err := rwExtendScript.Run(ctx, b.rdb, b.patternKeys("rw:", key), string(owner), millis(lease), m).Int64()
	if err != nil {
		return b.fail(ctx, "extend "+mode.String(), err)
	}
	if v != 1 {
		return lockx.ErrNotHeld
	}
	return nil
}

// ReleaseRW implements lockx.RWBackend. It wakes the waiters that can now
// be granted: every reader queued before the next writer, or that writer.
func (b *Backend) ReleaseRW(ctx context.Context, mode lockx.RWMode, key string, owner lockx.Owner) error {
	if b.err != nil {
		return b.err
	}
	m, err := modeArg(mode)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	v, err := rwReleaseScript.Run(ctx, b.rdb, b.patternKeys("rw:", key), string(owner), m, b.chpfArg, b.lockKey(key)).Int64()
	if err != nil {
		return b.fail(ctx, "release "+mode.String(), err)
	}
	if v != 1 {
		return lockx.ErrNotHeld
	}
	return nil
}
