package lockxd

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/lockx-go/lockx/internal/lockxd/wire"
	"github.com/lockx-go/lockx/lockx/driver"
)

// acquireMany serves POST /v1/locks/acquire-many: one all-or-nothing
// attempt at a set of keys, through the backend's ManyAcquirer (one round
// trip on Redis) or, without one, key by key here, freeing the keys taken
// if one is refused. Either way the client pays one request for the set.
func (s *Server) acquireMany(ctx context.Context, t *tenant, r *http.Request) (any, *httpError) {
	var m wire.Many
	if herr := parseBody(r, maxBatchBody, &m); herr != nil {
		return nil, herr
	}
	if len(m.Keys) == 0 || len(m.Keys) > wire.MaxBatch {
		return nil, badRequest("keys must hold 1 to %d keys", wire.MaxBatch)
	}
	if err := checkSecret("owner", m.Owner); err != nil {
		return nil, badRequest("%v", err)
	}
	if herr := s.checkLease("lease_ms", m.LeaseMS); herr != nil {
		return nil, herr
	}
	owner, lease := holder(t, m.Owner), time.Duration(m.LeaseMS)*time.Millisecond
	reqs := make([]driver.Request, len(m.Keys))
	for i, k := range m.Keys {
		if err := checkKey("key", k, maxKeyLen); err != nil {
			return nil, badRequest("keys[%d]: %v", i, err)
		}
		if i > 0 && k <= m.Keys[i-1] {
			return nil, badRequest("keys must be sorted and distinct")
		}
		reqs[i] = driver.Request{Key: t.bkey(k), Owner: owner, Lease: lease}
	}
	ids := make([]string, len(reqs))
	now := time.Now()
	for i, q := range reqs {
		ids[i] = holdID(kindLock, q.Key, owner, "")
		if !t.reserve(ids[i], now) {
			for _, id := range ids[:i] {
				t.settle(id, false, time.Time{})
			}
			return nil, &httpError{status: http.StatusTooManyRequests, code: "quota", title: "quota exceeded", detail: fmt.Sprintf("tenant %s would exceed its maximum of %d locks", t.name, t.cfg.MaxHeld), retryAfter: time.Second}
		}
	}
	granted := false
	defer func() {
		for _, id := range ids {
			t.settle(id, granted, now.Add(lease))
		}
	}()
	res, err := s.attemptMany(ctx, reqs)
	if err != nil {
		return nil, backendError(err)
	}
	if len(res) != len(reqs) {
		return nil, backendError(driver.Unavailable("acquire many", fmt.Errorf("backend returned %d results for %d keys", len(res), len(reqs))))
	}
	granted = true
	out := make([]wire.Grant, len(res))
	for i, rr := range res {
		out[i] = wire.Grant{Key: m.Keys[i], Owner: m.Owner, Holder: string(owner)}
		if rr.Acquired {
			out[i].Token, out[i].LeaseMS = rr.Token.String(), max(1, rr.TTL.Milliseconds())
			out[i].Signature = t.sign(m.Keys[i], rr.Token)
		} else {
			granted = false
			out[i].TTLMS = rr.TTL.Milliseconds()
		}
	}
	return wire.ManyResults{Results: out}, nil
}

// attemptMany makes the set's one attempt. Without a ManyAcquirer it takes
// the keys in order and, at the first refusal or error, releases what it
// took (owner-checked), so a refused set holds nothing.
func (s *Server) attemptMany(ctx context.Context, reqs []driver.Request) ([]driver.Result, error) {
	var ma driver.ManyAcquirer
	if driver.As(s.b, &ma) {
		return ma.AcquireMany(ctx, reqs)
	}
	res := make([]driver.Result, len(reqs))
	var err error
	n := 0
	for ; n < len(reqs); n++ {
		if res[n], err = s.b.Acquire(ctx, reqs[n]); err != nil || !res[n].Acquired {
			break
		}
	}
	if n == len(reqs) {
		return res, nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	for i := range n {
		_ = s.b.Release(rctx, reqs[i].Key, reqs[i].Owner)
		res[i] = driver.Result{}
	}
	if err != nil {
		// The key that failed may have been granted behind the error.
		_ = s.b.Release(rctx, reqs[n].Key, reqs[n].Owner)
		return nil, err
	}
	return res, nil
}
