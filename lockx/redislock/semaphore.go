package redislock

import (
	"context"
	"fmt"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/internal/backendkit"
)

// Semaphores (lockx.SemaphoreBackend). A semaphore on key lives in four keys
// sharing key's hash tag: prefix + "s:{key}" (usage, tokens, counts, marks),
// + ":r" (one lease per holder), + ":q" and + ":d" (the queue). See
// scripts/sem_lib.lua.
var (
	semAcquireScript = loadScript("token.lua", "queue.lua", "pattern_queue.lua", "sem_lib.lua", "sem_acquire.lua")
	semExtendScript  = loadScript("token.lua", "queue.lua", "pattern_queue.lua", "sem_lib.lua", "sem_extend.lua")
	semReleaseScript = loadScript("token.lua", "queue.lua", "pattern_queue.lua", "sem_lib.lua", "sem_release.lua")
	semUsageScript   = loadScript("token.lua", "queue.lua", "pattern_queue.lua", "sem_lib.lua", "sem_usage.lua")
)

var _ driver.SemaphoreBackend = (*Backend)(nil)

// AcquirePermits implements lockx.SemaphoreBackend with one script call.
func (b *Backend) AcquirePermits(ctx context.Context, req driver.PermitRequest) (driver.Result, error) {
	if b.err != nil {
		return driver.Result{}, b.err
	}
	if err := driver.CheckPermitRequest(req); err != nil {
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
	lk, owner := b.lockKey(req.Key), string(req.Owner)
	// A fair waiter of this backend may have been handed its permits by a
	// release already (sem_wake in scripts/sem_lib.lua, handoff.go).
	rec, fairWait := permitRecord(lk), req.Fair && req.Wait
	if fairWait {
		if res, ok := b.n.takePermits(rec, owner, req); ok {
			return res, nil
		}
	}
	sent := time.Now()
	v, err := semAcquireScript.Run(ctx, b.rdb, b.patternKeys("s:", req.Key),
		owner, millis(req.Lease), flagArgs[flags], millis(qttl), b.idArg,
		req.Limit, req.Count, b.chpfArg, lk).Int64Slice()
	if err != nil {
		return driver.Result{}, backendkit.Fail(ctx, "acquire permits", err)
	}
	res, err := verdict(v, req.Lease)
	switch {
	case !fairWait || err != nil:
	case res.Acquired:
		b.n.forget(rec, owner)
	default:
		b.n.refusedPermits(rec, owner, sent, req.Lease, qttl, req.Limit)
	}
	return res, err
}

// ExtendPermits implements lockx.SemaphoreBackend.
func (b *Backend) ExtendPermits(ctx context.Context, key string, owner driver.Owner, lease time.Duration) error {
	if b.err != nil {
		return b.err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	v, err := semExtendScript.Run(ctx, b.rdb, b.patternKeys("s:", key), string(owner), millis(lease)).Int64()
	if err != nil {
		return backendkit.Fail(ctx, "extend permits", err)
	}
	if v != 1 {
		return driver.ErrNotHeld
	}
	return nil
}

// ReleasePermits implements lockx.SemaphoreBackend. It hands the permits
// to the queued owners whose requests now fit, in queue order, and tells
// their backends (handoff.go): their next attempt costs no round trip.
func (b *Backend) ReleasePermits(ctx context.Context, key string, owner driver.Owner) error {
	if b.err != nil {
		return b.err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	lk := b.lockKey(key)
	b.n.forget(permitRecord(lk), string(owner)) // a handoff to owner is returned by this call
	v, err := semReleaseScript.Run(ctx, b.rdb, b.patternKeys("s:", key), string(owner), b.chpfArg, lk).Int64()
	if err != nil {
		return backendkit.Fail(ctx, "release permits", err)
	}
	if v != 1 {
		return driver.ErrNotHeld
	}
	return nil
}

// Permits implements lockx.SemaphoreBackend.
func (b *Backend) Permits(ctx context.Context, key string) (driver.PermitUsage, error) {
	if b.err != nil {
		return driver.PermitUsage{}, b.err
	}
	if err := ctx.Err(); err != nil {
		return driver.PermitUsage{}, err
	}
	v, err := semUsageScript.Run(ctx, b.rdb, b.patternKeys("s:", key)).Int64Slice()
	if err != nil {
		return driver.PermitUsage{}, backendkit.Fail(ctx, "permits", err)
	}
	if len(v) != 3 {
		return driver.PermitUsage{}, driver.Unavailable("permits", fmt.Errorf("unexpected script reply %v", v))
	}
	return driver.PermitUsage{InUse: v[0], Holders: v[1], Waiting: v[2]}, nil
}
