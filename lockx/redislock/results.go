package redislock

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/internal/backendkit"
)

// saveResultScript stores an outcome unless one is stored (save_result.lua).
var saveResultScript = loadScript("save_result.lua")

var _ driver.ResultStore = (*Backend)(nil)

// resultKey names the string that holds key's outcome: prefix + "r:{key}".
// It carries the same hash tag as key's lock, so both live on one Cluster
// node, and cannot collide with lock keys (they start with '{' after the
// prefix).
func (b *Backend) resultKey(key string) string {
	if key[0] == '}' {
		return b.cfg.prefix + "r:#{#}" + key
	}
	return b.cfg.prefix + "r:{" + key + "}"
}

// LoadResult implements lockx.ResultStore with one GET. Expired outcomes are
// gone: Redis expires the key at the end of the retention.
func (b *Backend) LoadResult(ctx context.Context, key string) (driver.Outcome, error) {
	if err := b.resultArgs(ctx, key, 1); err != nil {
		return driver.Outcome{}, err
	}
	raw, err := b.rdb.Get(ctx, b.resultKey(key)).Bytes()
	if errors.Is(err, redis.Nil) {
		return driver.Outcome{}, driver.ErrNoResult
	}
	if err != nil {
		return driver.Outcome{}, backendkit.Fail(ctx, "load result", err)
	}
	var o driver.Outcome
	if err := o.UnmarshalBinary(raw); err != nil {
		return driver.Outcome{}, driver.Unavailable("load result", err)
	}
	return o, nil
}

// SaveResult implements lockx.ResultStore with one script call: GET, and
// SET PX if nothing was there.
func (b *Backend) SaveResult(ctx context.Context, key string, o driver.Outcome, retention time.Duration) (driver.Outcome, bool, error) {
	if err := b.resultArgs(ctx, key, retention); err != nil {
		return driver.Outcome{}, false, err
	}
	if o.Created.IsZero() {
		o.Created = time.Now()
	}
	raw, err := o.MarshalBinary()
	if err != nil {
		return driver.Outcome{}, false, err
	}
	cur, err := saveResultScript.Run(ctx, b.rdb, []string{b.resultKey(key)}, raw, millis(retention)).Text()
	if errors.Is(err, redis.Nil) {
		return o, true, nil
	}
	if err != nil {
		return driver.Outcome{}, false, backendkit.Fail(ctx, "save result", err)
	}
	var won driver.Outcome
	if err := won.UnmarshalBinary([]byte(cur)); err != nil {
		return driver.Outcome{}, false, driver.Unavailable("save result", err)
	}
	return won, false, nil
}

// DeleteResult implements lockx.ResultStore with one DEL.
func (b *Backend) DeleteResult(ctx context.Context, key string) error {
	if err := b.resultArgs(ctx, key, 1); err != nil {
		return err
	}
	if err := b.rdb.Del(ctx, b.resultKey(key)).Err(); err != nil {
		return backendkit.Fail(ctx, "delete result", err)
	}
	return nil
}

func (b *Backend) resultArgs(ctx context.Context, key string, retention time.Duration) error {
	if b.err != nil {
		return b.err
	}
	if err := driver.CheckResultArgs(key, retention); err != nil {
		return err
	}
	return ctx.Err()
}
