package etcdlock

import (
	"context"
	"fmt"
	"strconv"

	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/internal/backendkit"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Fence state is one key per resource, <prefix>f/<resource>, holding the
// highest token accepted as 16 hex digits, so that etcd's byte-wise value
// comparison orders tokens numerically and the check-and-set is one
// transaction. It never expires (see lockx.FenceStore).

func fenceValue(t driver.Token) string { return fmt.Sprintf("%016x", uint64(t)) }

// Fence accepts token for resource if it is at least every token accepted
// so far, in one transaction (lockx.FenceStore).
func (b *Backend) Fence(ctx context.Context, resource string, tok driver.Token) error {
	if b.cfg.err != nil {
		return b.cfg.err
	}
	if err := driver.CheckFenceArgs(resource, tok); err != nil {
		return err
	}
	k, val := b.cfg.prefix+"f/"+resource, fenceValue(tok)
	resp, err := b.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(k), ">", val)).
		Then(clientv3.OpGet(k)).
		Else(clientv3.OpPut(k, val)).Commit()
	if err != nil {
		return backendkit.Unavailable("fence", err)
	}
	if !resp.Succeeded { // absent (a value comparison on a missing key fails) or not greater
		return nil
	}
	var seen driver.Token
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		n, _ := strconv.ParseUint(string(kvs[0].Value), 16, 64)
		seen = driver.Token(n)
	}
	return &driver.StaleTokenError{Resource: resource, Token: tok, Seen: seen}
}
