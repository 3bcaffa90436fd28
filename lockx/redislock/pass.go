package redislock

import (
	"context"
	"time"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/internal/backendkit"
)

var _ driver.Passer = (*Backend)(nil)

// Pass implements driver.Passer with one script call (scripts/pass.lua):
// GET, EXISTS and SET on the server, where a release and the next owner's
// acquire take two round trips and at least five commands. A key with a
// fair queue or waiter marks is released instead, as Release releases it,
// so a pass never goes ahead of a waiter of another process that is
// already in line. With WithReplicaAck the pass is acknowledged as a grant
// is (WAIT in the same pipeline), and taken back if it is not.
func (b *Backend) Pass(ctx context.Context, key string, from, to driver.Owner, lease time.Duration) (driver.Result, error) {
	if b.err != nil {
		return driver.Result{}, b.err
	}
	if err := ctx.Err(); err != nil {
		return driver.Result{}, err
	}
	c := b.newCall(key, from)
	b.n.forget(c.lk, c.owner) // a handoff to from is freed by this call
	flags := 0
	if b.cfg.clockTokens {
		flags = 8
	}
	c.ms = millis(lease)
	c.args[2], c.args[4], c.args[5], c.args[6] = "1", &c.owner, b.tombArg, b.chpfArg
	c.args[7], c.args[8], c.args[9] = encodeOwner(to), &c.ms, flagArgs[flags]
	var v int64
	var err error
	if b.cfg.replicas > 0 {
		v, err = b.acked(ctx, passScript, key, to, c, 10)
	} else {
		v, err = b.eval(ctx, passScript, c, 10)
	}
	switch {
	case err != nil:
		return driver.Result{}, backendkit.Fail(ctx, "pass", err)
	case v > 0:
		return driver.Result{Acquired: true, Token: driver.Token(v), TTL: lease}, nil
	case v == 0:
		return driver.Result{}, driver.ErrNotHeld
	}
	return driver.Result{}, nil
}
