package lockx

import (
	"context"

	"github.com/lockx-go/lockx/lockx/driver"
)

// ErrStaleToken reports a write fenced off because a newer holder's token
// has already been accepted for the resource. Every *StaleTokenError matches
// it with errors.Is.
var ErrStaleToken = driver.ErrStaleToken

// StaleTokenError is the verdict of a fence check (driver.FenceStore, the
// middleware's Fencing) on a stale token: Token was presented for Resource
// after Seen, a greater token, had been accepted.
type StaleTokenError = driver.StaleTokenError

type lockCtxKey struct{}

// ContextWithLock returns a context that carries l, so that code running
// under the lock — an HTTP client's transport, a storage helper — can find
// the key and the fencing token to present with its writes:
//
//	ctx := lockx.ContextWithLock(l.Context(), l)
//	req, _ := http.NewRequestWithContext(ctx, "PUT", url, body) // stamped by middleware.Transport
//
// The context also carries l's owner, so acquisitions under it re-enter.
func ContextWithLock(ctx context.Context, l *Lock) context.Context {
	if l == nil {
		return ctx
	}
	return context.WithValue(ContextWithOwner(ctx, l.Owner()), lockCtxKey{}, l)
}

// LockFromContext returns the lock carried by ctx (ContextWithLock), if any.
func LockFromContext(ctx context.Context) (*Lock, bool) {
	l, ok := ctx.Value(lockCtxKey{}).(*Lock)
	return l, ok && l != nil
}
