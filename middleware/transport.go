package middleware

import (
	"fmt"
	"net/http"

	"github.com/lockx-go/lockx/lockx"
)

// Transport is an http.RoundTripper that stamps each request with the lock
// key and fencing token of the lock its context holds, so that the services
// a lock holder calls can fence its writes:
//
//	client := &http.Client{Transport: &middleware.Transport{}}
//	ctx := lockx.ContextWithLock(l.Context(), l)
//	req, _ := http.NewRequestWithContext(ctx, "PUT", url, body)
//	resp, err := client.Do(req) // carries Lock-Key and Fencing-Token
//
// A request whose context carries no lock but the Fence of an incoming
// request checked by Fencing is stamped with that fence instead, so a
// service passes its caller's token on. Headers the request already has are
// left alone, and requests without either go out unchanged.
type Transport struct {
	// Base sends the requests; nil means http.DefaultTransport.
	Base http.RoundTripper
}

// RoundTrip implements http.RoundTripper. A request under a lock known to
// be lost fails with an error matching lockx.ErrLost without being sent: its
// write would be fenced off at best, and accepted at worst if the resource
// does not check.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	var f Fence
	if l, ok := lockx.LockFromContext(req.Context()); ok {
		select {
		case <-l.Lost():
			closeBody(req)
			return nil, fmt.Errorf("lockx/middleware: %s %s: lock %q: %w", req.Method, req.URL.Redacted(), l.Key(), lockx.ErrLost)
		default:
		}
		f = Fence{Resource: l.Key(), Token: l.Token(), Signature: l.TokenSignature()}
	} else if f, ok = FenceFromContext(req.Context()); !ok {
		return base.RoundTrip(req)
	}
	if req.Header.Get(HeaderLockKey) != "" || req.Header.Get(HeaderFencingToken) != "" {
		return base.RoundTrip(req)
	}
	// A RoundTripper must not modify the caller's request.
	r2 := req.Clone(req.Context())
	r2.Header.Set(HeaderLockKey, f.Resource)
	r2.Header.Set(HeaderFencingToken, f.Token.String())
	if f.Signature != "" {
		r2.Header.Set(HeaderTokenSignature, f.Signature)
	}
	return base.RoundTrip(r2)
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
