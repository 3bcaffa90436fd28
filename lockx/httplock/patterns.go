package httplock

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/lockx-go/lockx/internal/lockxd/wire"
	"github.com/lockx-go/lockx/lockx"
)

const (
	rwBase  = "/v1/rwlocks"
	semBase = "/v1/semaphores"
)

// AcquireRW implements lockx.RWBackend.
func (b *Backend) AcquireRW(ctx context.Context, mode lockx.RWMode, req lockx.Request) (lockx.Result, error) {
	return b.acquire(ctx, rwBase, req, wire.HoldRequest{Mode: mode.String()})
}

// ExtendRW implements lockx.RWBackend.
func (b *Backend) ExtendRW(ctx context.Context, mode lockx.RWMode, key string, owner lockx.Owner, lease time.Duration) error {
	return b.extend(ctx, rwBase, key, owner, lease, mode.String())
}

// ReleaseRW implements lockx.RWBackend.
func (b *Backend) ReleaseRW(ctx context.Context, mode lockx.RWMode, key string, owner lockx.Owner) error {
	return b.release(ctx, rwBase, key, owner, mode.String())
}

// AcquirePermits implements lockx.SemaphoreBackend.
func (b *Backend) AcquirePermits(ctx context.Context, req lockx.PermitRequest) (lockx.Result, error) {
	return b.acquire(ctx, semBase, req.Request, wire.HoldRequest{Limit: req.Limit, Count: req.Count})
}

// ExtendPermits implements lockx.SemaphoreBackend.
func (b *Backend) ExtendPermits(ctx context.Context, key string, owner lockx.Owner, lease time.Duration) error {
	return b.extend(ctx, semBase, key, owner, lease, "")
}

// ReleasePermits implements lockx.SemaphoreBackend.
func (b *Backend) ReleasePermits(ctx context.Context, key string, owner lockx.Owner) error {
	return b.release(ctx, semBase, key, owner, "")
}

// Permits implements lockx.SemaphoreBackend.
func (b *Backend) Permits(ctx context.Context, key string) (lockx.PermitUsage, error) {
	var u wire.Usage
	if _, _, err := b.call(ctx, "permits", http.MethodGet, semBase+"/usage?"+url.Values{"key": {key}}.Encode(), nil, &u); err != nil {
		return lockx.PermitUsage{}, err
	}
	return lockx.PermitUsage{InUse: u.InUse, Holders: u.Holders, Waiting: u.Waiting}, nil
}

// Fence implements lockx.FenceStore with the server's backend: resources
// live in the tenant's namespace, like keys.
func (b *Backend) Fence(ctx context.Context, resource string, token lockx.Token) error {
	return b.FenceSigned(ctx, resource, token, "")
}

// FenceSigned is Fence with the token's signature (Lock.TokenSignature),
// which a lockxd with a signing key requires: without it the check is
// refused (an *Error with status 428), with a wrong one too (403).
func (b *Backend) FenceSigned(ctx context.Context, resource string, token lockx.Token, signature string) error {
	if err := lockx.CheckFenceArgs(resource, token); err != nil {
		return err
	}
	status, p, err := b.call(ctx, "fence", http.MethodPost, "/v1/fence", wire.Fence{Resource: resource, Token: token.String(), Signature: signature}, nil)
	if err != nil || status == http.StatusOK {
		return err
	}
	seen, perr := lockx.ParseToken(p.Seen)
	if perr != nil {
		seen = token + 1 // refused without saying by what: at least this
	}
	return &lockx.StaleTokenError{Resource: resource, Token: token, Seen: seen}
}

func info(v wire.LockView) lockx.LockInfo {
	tok, _ := lockx.ParseToken(v.Token)
	return lockx.LockInfo{Key: v.Key, Owner: lockx.Owner(v.Holder), Token: tok, TTL: fromMS(v.TTLMS), Age: fromMS(v.AgeMS), Waiters: v.Waiters}
}

// Locks implements lockx.Inspector over the tenant's locks. lockxd returns
// at most 1000 locks per call.
func (b *Backend) Locks(ctx context.Context, prefix string, fn func(lockx.LockInfo) bool) error {
	var out wire.LockList
	if _, _, err := b.call(ctx, "locks", http.MethodGet, "/v1/locks?"+url.Values{"prefix": {prefix}}.Encode(), nil, &out); err != nil {
		return err
	}
	for _, v := range out.Locks {
		if !fn(info(v)) {
			break
		}
	}
	return nil
}

// Lock implements lockx.Inspector.
func (b *Backend) Lock(ctx context.Context, key string) (lockx.LockInfo, error) {
	var v wire.LockView
	if _, _, err := b.call(ctx, "lock", http.MethodGet, "/v1/locks?"+url.Values{"key": {key}}.Encode(), nil, &v); err != nil {
		return lockx.LockInfo{}, err
	}
	return info(v), nil
}

var (
	_ lockx.Backend          = (*Backend)(nil)
	_ lockx.Notifier         = (*Backend)(nil)
	_ lockx.BatchExtender    = (*Backend)(nil)
	_ lockx.ManyAcquirer     = (*Backend)(nil)
	_ lockx.RWBackend        = (*Backend)(nil)
	_ lockx.SemaphoreBackend = (*Backend)(nil)
	_ lockx.FenceStore       = (*Backend)(nil)
	_ lockx.Inspector        = (*Backend)(nil)
)
