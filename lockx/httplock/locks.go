package httplock

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/lockx-go/lockx/internal/lockxd/wire"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// acquire makes one attempt through base+"/try-acquire". With req.Wait the
// server registers a refused owner as a waiter (queue), as the lockx
// contract asks; the Client then waits on Watch.
func (b *Backend) acquire(ctx context.Context, base string, req driver.Request, body wire.HoldRequest) (driver.Result, error) {
	if err := checkLease(req.Lease); err != nil {
		return driver.Result{}, err
	}
	body.Key, body.Owner, body.LeaseMS = req.Key, string(req.Owner), ms(req.Lease)
	body.Fair, body.Queue, body.Renewed = req.Fair, req.Wait, req.Renewed
	if req.QueueTTL > 0 {
		body.QueueTTLMS = ms(req.QueueTTL)
	}
	var g wire.Grant
	status, p, err := b.call(ctx, "acquire", http.MethodPost, base+"/try-acquire", body, &g)
	if err != nil {
		return driver.Result{}, err
	}
	if status != http.StatusOK {
		return driver.Result{TTL: fromMS(p.TTLMS)}, nil
	}
	tok, err := lockx.ParseToken(g.Token)
	if err != nil || g.LeaseMS <= 0 {
		// The grant happened but is unusable: give it back, report unknown.
		_ = b.release(context.WithoutCancel(ctx), base, req.Key, req.Owner, body.Mode)
		return driver.Result{}, driver.Unavailable("acquire", errNoToken)
	}
	return driver.Result{Acquired: true, Token: tok, TTL: fromMS(g.LeaseMS), Signature: g.Signature}, nil
}

func (b *Backend) extend(ctx context.Context, base, key string, owner driver.Owner, lease time.Duration, mode string) error {
	if err := checkLease(lease); err != nil {
		return err
	}
	_, _, err := b.call(ctx, "extend", http.MethodPost, base+"/extend", wire.HoldRequest{Key: key, Owner: string(owner), LeaseMS: ms(lease), Mode: mode}, nil)
	return err
}

func (b *Backend) release(ctx context.Context, base, key string, owner driver.Owner, mode string) error {
	_, _, err := b.call(ctx, "release", http.MethodPost, base+"/release", wire.HoldRequest{Key: key, Owner: string(owner), Mode: mode}, nil)
	return err
}

// Acquire implements driver.Backend.
func (b *Backend) Acquire(ctx context.Context, req driver.Request) (driver.Result, error) {
	return b.acquire(ctx, "/v1/locks", req, wire.HoldRequest{})
}

// Extend implements driver.Backend.
func (b *Backend) Extend(ctx context.Context, key string, owner driver.Owner, lease time.Duration) error {
	return b.extend(ctx, "/v1/locks", key, owner, lease, "")
}

// Release implements driver.Backend.
func (b *Backend) Release(ctx context.Context, key string, owner driver.Owner) error {
	return b.release(ctx, "/v1/locks", key, owner, "")
}

// TTL implements driver.Backend.
func (b *Backend) TTL(ctx context.Context, key string, owner driver.Owner) (time.Duration, error) {
	var g wire.Grant
	if _, _, err := b.call(ctx, "ttl", http.MethodPost, "/v1/locks/ttl", wire.HoldRequest{Key: key, Owner: string(owner)}, &g); err != nil {
		return 0, err
	}
	return fromMS(g.TTLMS), nil
}

// ExtendMany implements driver.BatchExtender: the watchdog's renewals of
// one client go out in one request (per 1024).
func (b *Backend) ExtendMany(ctx context.Context, reqs []driver.ExtendRequest) []error {
	errs := make([]error, len(reqs))
	for lo := 0; lo < len(reqs); lo += wire.MaxBatch {
		hi := min(lo+wire.MaxBatch, len(reqs))
		b.extendBatch(ctx, reqs[lo:hi], errs[lo:hi])
	}
	return errs
}

func (b *Backend) extendBatch(ctx context.Context, reqs []driver.ExtendRequest, errs []error) {
	items := make([]wire.BatchItem, len(reqs))
	for i, r := range reqs {
		items[i] = wire.BatchItem{Key: r.Key, Owner: string(r.Owner), LeaseMS: ms(r.Lease)}
		if err := checkLease(r.Lease); err != nil {
			for j := range errs {
				errs[j] = err
			}
			return
		}
	}
	var out wire.BatchResults
	_, _, err := b.call(ctx, "extend", http.MethodPost, "/v1/locks/extend-many", wire.Batch{Locks: items}, &out)
	if err == nil && len(out.Results) != len(reqs) {
		err = driver.Unavailable("extend", errors.New("lockxd: extend-many returned a wrong number of results"))
	}
	for i := range errs {
		switch {
		case err != nil:
			errs[i] = err
		case out.Results[i].Status == http.StatusOK:
			errs[i] = nil
		case out.Results[i].Status == http.StatusNotFound:
			errs[i] = driver.ErrNotHeld
		default:
			r := out.Results[i]
			errs[i] = driver.Unavailable("extend", &Error{Status: r.Status, Code: r.Code, Detail: r.Detail})
		}
	}
}

// AcquireMany implements driver.ManyAcquirer: the whole set in one request
// (POST /v1/locks/acquire-many), all or nothing. lockxd uses its backend's
// own ManyAcquirer if it has one, else takes the keys itself.
func (b *Backend) AcquireMany(ctx context.Context, reqs []driver.Request) ([]driver.Result, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	if err := driver.CheckManyRequests(reqs); err != nil {
		return nil, err
	}
	m := wire.Many{Owner: string(reqs[0].Owner), LeaseMS: ms(reqs[0].Lease), Keys: make([]string, len(reqs))}
	for i, r := range reqs {
		if err := checkLease(r.Lease); err != nil {
			return nil, err
		}
		if r.Lease != reqs[0].Lease {
			return nil, &driver.ArgError{Arg: "requests", Reason: "lockxd takes a set with one lease"}
		}
		m.Keys[i] = r.Key
	}
	var out wire.ManyResults
	if _, _, err := b.call(ctx, "acquire many", http.MethodPost, "/v1/locks/acquire-many", m, &out); err != nil {
		return nil, err
	}
	if len(out.Results) != len(reqs) {
		return nil, driver.Unavailable("acquire many", errors.New("lockxd: acquire-many returned a wrong number of results"))
	}
	res := make([]driver.Result, len(reqs))
	for i, g := range out.Results {
		if g.Token == "" {
			res[i] = driver.Result{TTL: fromMS(g.TTLMS)}
			continue
		}
		tok, err := lockx.ParseToken(g.Token)
		if err != nil || g.LeaseMS <= 0 {
			return nil, driver.Unavailable("acquire many", errNoToken)
		}
		res[i] = driver.Result{Acquired: true, Token: tok, TTL: fromMS(g.LeaseMS), Signature: g.Signature}
	}
	return res, nil
}
