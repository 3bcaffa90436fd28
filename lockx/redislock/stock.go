package redislock

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/internal/backendkit"
)

// The stock scripts (stock_*.lua). Each touches the keys of one segment, or
// one buyer's quota, or one SKU's meta key: never two slots.
var (
	stockInitScript     = loadScript("stock_init.lua")
	stockSegInitScript  = loadScript("stock_seg_init.lua")
	stockTakeScript     = loadScript("stock_lib.lua", "stock_take.lua")
	stockSettleScript   = loadScript("stock_lib.lua", "stock_settle.lua")
	stockAddScript      = loadScript("stock_add.lua")
	stockExpireScript   = loadScript("stock_lib.lua", "stock_expire.lua")
	stockSnapshotScript = loadScript("stock_snapshot.lua")
	stockQuotaScript    = loadScript("stock_quota.lua")
)

var _ driver.StockBackend = (*Backend)(nil)

// Stock keys. A segment's hash tag is "<sku>/<seg>", so the segments of one
// SKU hash to different Cluster slots and a hot SKU spreads over the nodes,
// while the three keys of one segment — its hash (level "n", supplied
// "in"), its ledger ":l" and its reservation deadlines ":x" — share a slot
// and one script updates them atomically. The SKU's meta key (initial
// levels, "sm:") and each buyer's quota counter ("sq:", tagged by SKU and
// buyer) are single keys. Names are unambiguous: the segment number has no
// '/', and the quota tag starts with the SKU's length.
func (b *Backend) stockKey(kind, tag string) string {
	if tag[0] == '}' {
		return b.cfg.prefix + kind + "#{#}" + tag
	}
	return b.cfg.prefix + kind + "{" + tag + "}"
}

func (b *Backend) segKeys(sku string, seg int) (h, ledger, deadlines string) {
	h = b.stockKey("ss:", sku+"/"+strconv.Itoa(seg))
	return h, h + ":l", h + ":x"
}

func (b *Backend) quotaKey(sku, user string) string {
	return b.stockKey("sq:", strconv.Itoa(len(sku))+":"+sku+"/"+user)
}

// runStock runs a stock script whose reply is an integer, through the
// backend's batcher like the lock scripts.
func (b *Backend) runStock(ctx context.Context, s *script, keys []string, args ...any) (int64, error) {
	c := &call{}
	c.args[2] = strconv.Itoa(len(keys))
	n := 3
	for _, k := range keys {
		c.args[n] = k
		n++
	}
	for _, a := range args {
		c.args[n] = a
		n++
	}
	return b.eval(ctx, s, c, n)
}

func (b *Backend) stockArgs(ctx context.Context, sku string, seg int) error {
	if b.err != nil {
		return b.err
	}
	if err := driver.CheckStockArgs(sku, seg); err != nil {
		return err
	}
	return ctx.Err()
}

// InitStock implements lockx.StockBackend. The levels are recorded on the
// SKU's meta key first (first writer wins), then every segment is created
// from the recorded levels if missing; a crash between the two steps is
// completed by the next InitStock, and an existing segment is never reset.
func (b *Backend) InitStock(ctx context.Context, sku string, levels []int64) (int, bool, error) {
	if err := b.stockArgs(ctx, sku, len(levels)-1); err != nil {
		return 0, false, err
	}
	parts := make([]string, len(levels))
	for i, l := range levels {
		if l < 0 {
			return 0, false, &driver.ArgError{Arg: "level", Reason: "must not be negative"}
		}
		parts[i] = strconv.FormatInt(l, 10)
	}
	csv := strings.Join(parts, ",")
	cur, err := stockInitScript.Run(ctx, b.rdb, []string{b.stockKey("sm:", sku)}, csv).Text()
	created := errors.Is(err, redis.Nil)
	if err != nil && !created {
		return 0, false, backendkit.Fail(ctx, "init stock", err)
	}
	if !created {
		parts = strings.Split(cur, ",")
	}
	pipe := b.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(parts))
	for i, l := range parts {
		h, _, _ := b.segKeys(sku, i)
		cmds[i] = stockSegInitScript.Eval(ctx, pipe, []string{h}, l)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, false, backendkit.Fail(ctx, "init stock", err)
	}
	return len(parts), created, nil
}

// StockLevels implements lockx.StockBackend with one pipelined HGET per
// segment (split by slot on Cluster).
func (b *Backend) StockLevels(ctx context.Context, sku string, segs []int) ([]int64, error) {
	if err := b.stockArgs(ctx, sku, 0); err != nil {
		return nil, err
	}
	if len(segs) == 1 {
		// The lone read of lock-based mode goes through the batcher,
		// like the scripts, so concurrent readers share round trips.
		if err := driver.CheckStockArgs(sku, segs[0]); err != nil {
			return nil, err
		}
		h, _, _ := b.segKeys(sku, segs[0])
		cmd := redis.NewStringCmd(ctx, "hget", h, "n")
		_ = b.run.Process(ctx, cmd)
		n, err := cmd.Int64()
		if err != nil {
			return nil, b.stockErr(ctx, "stock levels", err)
		}
		return []int64{n}, nil
	}
	pipe := b.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(segs))
	for i, seg := range segs {
		if err := driver.CheckStockArgs(sku, seg); err != nil {
			return nil, err
		}
		h, _, _ := b.segKeys(sku, seg)
		cmds[i] = pipe.HGet(ctx, h, "n")
	}
	_, _ = pipe.Exec(ctx)
	out := make([]int64, len(segs))
	for i, c := range cmds {
		n, err := c.Int64()
		if err != nil {
			return nil, b.stockErr(ctx, "stock levels", err)
		}
		out[i] = n
	}
	return out, nil
}

func (b *Backend) stockErr(ctx context.Context, op string, err error) error {
	if errors.Is(err, redis.Nil) {
		return driver.ErrNoStock
	}
	return backendkit.Fail(ctx, op, err)
}

// TakeStock implements lockx.StockBackend with one script call.
func (b *Backend) TakeStock(ctx context.Context, t driver.StockTake) (int64, error) {
	if b.err != nil {
		return 0, b.err
	}
	if err := driver.CheckStockTake(t); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	h, l, x := b.segKeys(t.SKU, t.Seg)
	var ttl int64
	if t.TTL > 0 {
		ttl = millis(t.TTL)
	}
	v, err := b.runStock(ctx, stockTakeScript, []string{h, l, x}, t.ID, t.Qty, t.Expect, ttl, t.User)
	switch {
	case err != nil:
		return 0, backendkit.Fail(ctx, "take stock", err)
	case v == -1:
		return 0, driver.ErrNoStock
	case v < 0:
		return -2 - v, driver.ErrStockShort
	}
	return v, nil
}

// SettleStock implements lockx.StockBackend with one script call.
func (b *Backend) SettleStock(ctx context.Context, sku string, seg int, id string, confirm bool) error {
	if err := b.stockArgs(ctx, sku, seg); err != nil {
		return err
	}
	h, l, x := b.segKeys(sku, seg)
	flag := "0"
	if confirm {
		flag = "1"
	}
	v, err := b.runStock(ctx, stockSettleScript, []string{h, l, x}, id, flag)
	if err != nil {
		return backendkit.Fail(ctx, "settle stock", err)
	}
	if v == 0 {
		return driver.ErrNoStockEntry
	}
	return nil
}

// AddStock implements lockx.StockBackend with one script call.
func (b *Backend) AddStock(ctx context.Context, sku string, seg int, n int64) (int64, error) {
	if err := b.stockArgs(ctx, sku, seg); err != nil {
		return 0, err
	}
	h, _, _ := b.segKeys(sku, seg)
	v, err := b.runStock(ctx, stockAddScript, []string{h}, n)
	switch {
	case err != nil:
		return 0, backendkit.Fail(ctx, "add stock", err)
	case v == -1:
		return 0, driver.ErrNoStock
	case v < 0:
		return -2 - v, driver.ErrStockShort
	}
	return v, nil
}

// ExpireStock implements lockx.StockBackend with one script call.
func (b *Backend) ExpireStock(ctx context.Context, sku string, seg int, max int) ([]driver.StockEntry, error) {
	if err := b.stockArgs(ctx, sku, seg); err != nil {
		return nil, err
	}
	if max <= 0 {
		return nil, nil
	}
	h, l, x := b.segKeys(sku, seg)
	flat, err := stockExpireScript.Run(ctx, b.rdb, []string{h, l, x}, max).StringSlice()
	if err != nil {
		return nil, backendkit.Fail(ctx, "expire stock", err)
	}
	return parseEntries(flat)
}

// StockSegment implements lockx.StockBackend with one script call.
func (b *Backend) StockSegment(ctx context.Context, sku string, seg int) (driver.StockSegment, error) {
	if err := b.stockArgs(ctx, sku, seg); err != nil {
		return driver.StockSegment{}, err
	}
	h, l, x := b.segKeys(sku, seg)
	raw, err := stockSnapshotScript.Run(ctx, b.rdb, []string{h, l, x}).Slice()
	if err != nil {
		return driver.StockSegment{}, b.stockErr(ctx, "stock segment", err)
	}
	if len(raw) != 3 {
		return driver.StockSegment{}, driver.Unavailable("stock segment", errors.New("malformed reply"))
	}
	lv, _ := raw[0].(int64)
	in, _ := raw[1].(int64)
	items, _ := raw[2].([]any)
	flat := make([]string, len(items))
	for i, it := range items {
		flat[i], _ = it.(string)
	}
	es, err := parseEntries(flat)
	if err != nil {
		return driver.StockSegment{}, err
	}
	return driver.StockSegment{Level: lv, Supplied: in, Entries: es}, nil
}

// parseEntries decodes id, "qty:deadline_ms:user" pairs.
func parseEntries(flat []string) ([]driver.StockEntry, error) {
	out := make([]driver.StockEntry, 0, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		qs, rest, ok1 := strings.Cut(flat[i+1], ":")
		ds, user, ok2 := strings.Cut(rest, ":")
		q, err1 := strconv.ParseInt(qs, 10, 64)
		d, err2 := strconv.ParseInt(ds, 10, 64)
		if !ok1 || !ok2 || err1 != nil || err2 != nil {
			return nil, driver.Unavailable("stock entry", errors.New("malformed ledger entry "+strconv.Quote(flat[i+1])))
		}
		e := driver.StockEntry{ID: flat[i], User: user, Qty: q}
		if d > 0 {
			e.Deadline = time.UnixMilli(d)
		}
		out = append(out, e)
	}
	return out, nil
}

// ClaimQuota implements lockx.StockBackend with one script call on the
// buyer's own counter, so buyers spread over the Cluster too.
func (b *Backend) ClaimQuota(ctx context.Context, sku, user string, delta, limit int64) (int64, error) {
	if err := b.stockArgs(ctx, sku, 0); err != nil {
		return 0, err
	}
	v, err := b.runStock(ctx, stockQuotaScript, []string{b.quotaKey(sku, user)}, delta, max(limit, 0))
	if err != nil {
		return 0, backendkit.Fail(ctx, "claim quota", err)
	}
	if v < 0 {
		return -1 - v, driver.ErrQuotaExceeded
	}
	return v, nil
}
