package httplock

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/lockx-go/lockx/internal/lockxd/wire"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

const (
	rwBase  = "/v1/rwlocks"
	semBase = "/v1/semaphores"
)

// AcquireRW implements driver.RWBackend.
func (b *Backend) AcquireRW(ctx context.Context, mode driver.RWMode, req driver.Request) (driver.Result, error) {
	return b.acquire(ctx, rwBase, req, wire.HoldRequest{Mode: mode.String()})
}

// ExtendRW implements driver.RWBackend.
func (b *Backend) ExtendRW(ctx context.Context, mode driver.RWMode, key string, owner driver.Owner, lease time.Duration) error {
	return b.extend(ctx, rwBase, key, owner, lease, mode.String())
}

// ReleaseRW implements driver.RWBackend.
func (b *Backend) ReleaseRW(ctx context.Context, mode driver.RWMode, key string, owner driver.Owner) error {
	return b.release(ctx, rwBase, key, owner, mode.String())
}

// AcquirePermits implements driver.SemaphoreBackend.
func (b *Backend) AcquirePermits(ctx context.Context, req driver.PermitRequest) (driver.Result, error) {
	return b.acquire(ctx, semBase, req.Request, wire.HoldRequest{Limit: req.Limit, Count: req.Count})
}

// ExtendPermits implements driver.SemaphoreBackend.
func (b *Backend) ExtendPermits(ctx context.Context, key string, owner driver.Owner, lease time.Duration) error {
	return b.extend(ctx, semBase, key, owner, lease, "")
}

// ReleasePermits implements driver.SemaphoreBackend.
func (b *Backend) ReleasePermits(ctx context.Context, key string, owner driver.Owner) error {
	return b.release(ctx, semBase, key, owner, "")
}

// Permits implements driver.SemaphoreBackend.
func (b *Backend) Permits(ctx context.Context, key string) (driver.PermitUsage, error) {
	var u wire.Usage
	if _, _, err := b.call(ctx, "permits", http.MethodGet, semBase+"/usage?"+url.Values{"key": {key}}.Encode(), nil, &u); err != nil {
		return driver.PermitUsage{}, err
	}
	return driver.PermitUsage{InUse: u.InUse, Holders: u.Holders, Waiting: u.Waiting}, nil
}

// Fence implements driver.FenceStore with the server's backend: resources
// live in the tenant's namespace, like keys.
func (b *Backend) Fence(ctx context.Context, resource string, token driver.Token) error {
	return b.FenceSigned(ctx, resource, token, "")
}

// FenceSigned is Fence with the token's signature (Lock.TokenSignature),
// which a lockxd with a signing key requires: without it the check is
// refused (an *Error with status 428), with a wrong one too (403).
func (b *Backend) FenceSigned(ctx context.Context, resource string, token driver.Token, signature string) error {
	if err := driver.CheckFenceArgs(resource, token); err != nil {
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
	return &driver.StaleTokenError{Resource: resource, Token: token, Seen: seen}
}

func info(v wire.LockView) driver.LockInfo {
	tok, _ := lockx.ParseToken(v.Token)
	return driver.LockInfo{Key: v.Key, Owner: driver.Owner(v.Holder), Token: tok, TTL: fromMS(v.TTLMS), Age: fromMS(v.AgeMS), Waiters: v.Waiters}
}

// Locks implements driver.Inspector over the tenant's locks. lockxd returns
// at most 1000 locks per call.
func (b *Backend) Locks(ctx context.Context, prefix string, fn func(driver.LockInfo) bool) error {
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

// Lock implements driver.Inspector.
func (b *Backend) Lock(ctx context.Context, key string) (driver.LockInfo, error) {
	var v wire.LockView
	if _, _, err := b.call(ctx, "lock", http.MethodGet, "/v1/locks?"+url.Values{"key": {key}}.Encode(), nil, &v); err != nil {
		return driver.LockInfo{}, err
	}
	return info(v), nil
}

var (
	_ driver.Backend          = (*Backend)(nil)
	_ driver.Notifier         = (*Backend)(nil)
	_ driver.BatchExtender    = (*Backend)(nil)
	_ driver.ManyAcquirer     = (*Backend)(nil)
	_ driver.RWBackend        = (*Backend)(nil)
	_ driver.SemaphoreBackend = (*Backend)(nil)
	_ driver.FenceStore       = (*Backend)(nil)
	_ driver.Inspector        = (*Backend)(nil)
)
