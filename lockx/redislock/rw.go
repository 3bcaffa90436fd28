package redislock

import (
	"context"
	"fmt"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/internal/backendkit"
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

var _ driver.RWBackend = (*Backend)(nil)

// patternKeys returns the four keys of a pattern (ns "rw:" or "s:") on key,
// tagged like the lock's keys (see keys).
func (b *Backend) patternKeys(ns, key string) []string {
	base := b.cfg.prefix + ns + "{" + key + "}"
	if len(key) > 0 && key[0] == '}' {
		base = b.cfg.prefix + ns + "#{#}" + key
	}
	return []string{base, base + ":r", base + ":q", base + ":d"}
}

func modeArg(mode driver.RWMode) (string, error) {
	switch mode {
	case driver.ModeRead:
		return "r", nil
	case driver.ModeWrite:
		return "w", nil
	}
	return "", &driver.ArgError{Arg: "mode", Reason: "neither read nor write"}
}

// AcquireRW implements lockx.RWBackend with one script call.
func (b *Backend) AcquireRW(ctx context.Context, mode driver.RWMode, req driver.Request) (driver.Result, error) {
	if b.err != nil {
		return driver.Result{}, b.err
	}
	m, err := modeArg(mode)
	if err != nil {
		return driver.Result{}, err
	}
	if err := ctx.Err(); err != nil {
		return driver.Result{}, err
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
		return driver.Result{}, backendkit.Fail(ctx, "acquire "+mode.String(), err)
	}
	return verdict(v, req.Lease)
}

// verdict decodes a pattern acquire script's reply.
func verdict(v []int64, lease time.Duration) (driver.Result, error) {
	switch {
	case len(v) == 2 && v[0] == 1:
		return driver.Result{Acquired: true, Token: driver.Token(v[1]), TTL: lease}, nil
	case len(v) == 2 && v[0] == 0:
		return driver.Result{TTL: time.Duration(max(v[1], 0)) * time.Millisecond}, nil
	case len(v) == 1 && v[0] == 2:
		return driver.Result{}, driver.ErrUpgrade
	}
	return driver.Result{}, driver.Unavailable("acquire", fmt.Errorf("unexpected script reply %v", v))
}

// ExtendRW implements lockx.RWBackend.
func (b *Backend) ExtendRW(ctx context.Context, mode driver.RWMode, key string, owner driver.Owner, lease time.Duration) error {
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
		return backendkit.Fail(ctx, "extend "+mode.String(), err)
	}
	if v != 1 {
		return driver.ErrNotHeld
	}
	return nil
}

// ReleaseRW implements lockx.RWBackend. It wakes the waiters that can now
// be granted: every reader queued before the next writer, or that writer.
func (b *Backend) ReleaseRW(ctx context.Context, mode driver.RWMode, key string, owner driver.Owner) error {
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
		return backendkit.Fail(ctx, "release "+mode.String(), err)
	}
	if v != 1 {
		return driver.ErrNotHeld
	}
	return nil
}
