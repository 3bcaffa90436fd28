package lockxd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/lockx-go/lockx/internal/lockxd/wire"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// request is the body of the hold endpoints.
type request = wire.HoldRequest

// parse decodes and validates a hold endpoint's body for op.
func (s *Server) parse(k kind, op string, r *http.Request) (request, *httpError) {
	var req request
	if herr := parseBody(r, maxBody, &req); herr != nil {
		return request{}, herr
	}
	return req, s.validate(k, op, &req)
}

func (s *Server) checkLease(name string, ms int64) *httpError {
	if ms <= 0 {
		return badRequest("%s must be positive", name)
	}
	if ms > s.cfg.MaxLease.Milliseconds() {
		return badRequest("%s %d exceeds the server's maximum %d", name, ms, s.cfg.MaxLease.Milliseconds())
	}
	return nil
}

func (s *Server) validate(k kind, op string, req *request) *httpError {
	if err := checkKey("key", req.Key, maxKeyLen); err != nil {
		return badRequest("%v", err)
	}
	acquire := op == "acquire" || op == "try-acquire"
	switch {
	case acquire && req.Owner != "":
		if err := checkSecret("owner", req.Owner); err != nil {
			return badRequest("%v", err)
		}
	case !acquire:
		if err := checkKey("owner", req.Owner, maxOwnerLen); err != nil {
			return badRequest("%v", err)
		}
	}
	if acquire || op == "extend" {
		if herr := s.checkLease("lease_ms", req.LeaseMS); herr != nil {
			return herr
		}
	} else if req.LeaseMS != 0 {
		return badRequest("lease_ms is not used by %s", op)
	}
	switch {
	case op == "acquire":
		if req.WaitMS < 0 || req.WaitMS > s.cfg.MaxWait.Milliseconds() {
			return badRequest("wait_ms must be in [0, %d]", s.cfg.MaxWait.Milliseconds())
		}
		if req.Queue {
			return badRequest("queue is only for try-acquire (acquire waits itself)")
		}
	case req.WaitMS != 0:
		return badRequest("wait_ms is only for acquire")
	case !acquire && (req.Fair || req.Queue || req.Renewed || req.QueueTTLMS != 0):
		return badRequest("fair, queue, queue_ttl_ms and renewed are only for acquire and try-acquire")
	}
	if req.QueueTTLMS != 0 {
		if herr := s.checkLease("queue_ttl_ms", req.QueueTTLMS); herr != nil {
			return herr
		}
	}
	if k == kindRW {
		if req.Mode != "read" && req.Mode != "write" {
			return badRequest(`mode must be "read" or "write"`)
		}
	} else if req.Mode != "" {
		return badRequest("mode is only for rwlocks")
	}
	if k == kindSem && acquire {
		if req.Limit <= 0 || req.Limit > 1<<20 {
			return badRequest("limit must be in [1, %d]", 1<<20)
		}
		if req.Count == 0 {
			req.Count = 1
		}
		if req.Count < 0 || req.Count > req.Limit {
			return badRequest("count must be in [1, limit]")
		}
	} else if req.Limit != 0 || req.Count != 0 {
		return badRequest("limit and count are only for semaphore acquire")
	}
	return nil
}

func mode(m string) driver.RWMode {
	if m == "read" {
		return driver.ModeRead
	}
	return driver.ModeWrite
}

// ops are the backend operations of one kind of hold.
type ops struct {
	acquire func(ctx context.Context, br driver.Request) (driver.Result, error)
	extend  func(ctx context.Context, key string, owner lockx.Owner, lease time.Duration) error
	release func(ctx context.Context, key string, owner lockx.Owner) error
}

// ops returns the operations of kind k for req, or a 501 if the backend
// lacks the capability.
func (s *Server) ops(k kind, req *request) (ops, *httpError) {
	switch k {
	case kindRW:
		var rb driver.RWBackend
		ok := driver.As(s.b, &rb)
		if !ok {
			return ops{}, unsupported("rwlocks")
		}
		m := mode(req.Mode)
		return ops{
			acquire: func(ctx context.Context, br driver.Request) (driver.Result, error) { return rb.AcquireRW(ctx, m, br) },
			extend: func(ctx context.Context, key string, o lockx.Owner, lease time.Duration) error {
				return rb.ExtendRW(ctx, m, key, o, lease)
			},
			release: func(ctx context.Context, key string, o lockx.Owner) error { return rb.ReleaseRW(ctx, m, key, o) },
		}, nil
	case kindSem:
		var sb driver.SemaphoreBackend
		ok := driver.As(s.b, &sb)
		if !ok {
			return ops{}, unsupported("semaphores")
		}
		limit, count := req.Limit, req.Count
		return ops{
			acquire: func(ctx context.Context, br driver.Request) (driver.Result, error) {
				return sb.AcquirePermits(ctx, driver.PermitRequest{Request: br, Limit: limit, Count: count})
			},
			extend:  sb.ExtendPermits,
			release: sb.ReleasePermits,
		}, nil
	}
	return ops{acquire: s.b.Acquire, extend: s.b.Extend, release: s.b.Release}, nil
}

func holdID(k kind, key string, owner lockx.Owner, m string) string {
	return k.path() + "\x00" + m + "\x00" + key + "\x00" + string(owner)
}

func (s *Server) acquire(k kind, wait bool) handler {
	op := "try-acquire"
	if wait {
		op = "acquire"
	}
	return func(ctx context.Context, t *tenant, r *http.Request) (any, *httpError) {
		req, o, herr := s.hold(k, op, r)
		if herr != nil {
			return nil, herr
		}
		secret := lockx.Owner(req.Owner)
		if secret == "" {
			secret = lockx.NewOwner()
		}
		owner := holder(t, string(secret))
		lease := time.Duration(req.LeaseMS) * time.Millisecond
		key := t.bkey(req.Key)
		id := holdID(k, key, owner, req.Mode)
		if !t.reserve(id, time.Now()) {
			return nil, &httpError{status: http.StatusTooManyRequests, code: "quota", title: "quota exceeded", detail: fmt.Sprintf("tenant %s holds its maximum of %d locks", t.name, t.cfg.MaxHeld), retryAfter: time.Second}
		}
		granted := false
		var expiry time.Time
		defer func() { t.settle(id, granted, expiry) }()

		longPoll := wait && req.WaitMS > 0
		br := driver.Request{Key: key, Owner: owner, Lease: lease, Fair: req.Fair, Wait: longPoll || req.Queue,
			QueueTTL: time.Duration(req.QueueTTLMS) * time.Millisecond, Renewed: req.Renewed}
		start := time.Now()
		res, err := o.acquire(ctx, br)
		if err == nil && !res.Acquired && longPoll {
			if !t.startWait() {
				if br.Fair {
					_ = o.release(context.WithoutCancel(ctx), key, owner)
				}
				return nil, &httpError{status: http.StatusTooManyRequests, code: "quota", title: "quota exceeded", detail: fmt.Sprintf("tenant %s has its maximum of %d waiters", t.name, t.cfg.MaxWaiters), retryAfter: time.Second}
			}
			res, err = s.longPoll(ctx, br, res, time.Duration(req.WaitMS)*time.Millisecond, o.acquire)
			t.endWait()
			if err != nil || !res.Acquired {
				// Leave the queue, so the next waiter is not stalled, and
				// free a grant whose reply was lost to the deadline: the
				// client is told 409, so nobody must hold as this owner.
				wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
				_ = o.release(wctx, key, owner)
				cancel()
			}
		}
		if err != nil {
			return nil, backendError(err)
		}
		if !res.Acquired {
			return nil, &httpError{status: http.StatusConflict, code: "not-acquired", title: "not acquired", detail: "the key is held by another owner", retryAfter: res.TTL, ttl: res.TTL}
		}
		granted = true
		got := lease
		if res.TTL > 0 && res.TTL < lease {
			got = res.TTL // a shorter first lease of a direct handoff (renewed)
		}
		expiry = start.Add(got)
		return wire.Grant{Key: req.Key, Owner: string(secret), Holder: string(owner), Token: res.Token.String(), Signature: t.sign(req.Key, res.Token), LeaseMS: max(1, got.Milliseconds()), Mode: req.Mode, Count: req.Count}, nil
	}
}

// longPoll retries a refused attempt until it is granted or wait elapses
// (or the client goes away, or the server shuts down). With a Notifier
// backend it sleeps until the key's release wakes it; otherwise it polls
// with backoff bounded by the holder's TTL.
func (s *Server) longPoll(ctx context.Context, br driver.Request, res driver.Result, wait time.Duration, attempt func(context.Context, driver.Request) (driver.Result, error)) (driver.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var n driver.Notifier
	driver.As(s.b, &n)
	backoff := 5 * time.Millisecond
	for {
		lastTTL := res.TTL
		var wake <-chan struct{}
		stop := func() {}
		if n != nil {
			w, c, err := n.Watch(ctx, br.Key, br.Owner)
			if err == nil {
				wake, stop = w, c
			}
		}
		// Attempt again after the watch is set, so no release is missed.
		var err error
		res, err = attempt(ctx, br)
		if err != nil || res.Acquired {
			stop()
			if err != nil && ctx.Err() != nil {
				return driver.Result{TTL: lastTTL}, nil // wait elapsed: not acquired
			}
			return res, err
		}
		sleep := backoff
		if wake != nil {
			sleep = 250 * time.Millisecond // safety net against a lost wake-up
		} else {
			backoff = min(backoff*2, 100*time.Millisecond)
		}
		if res.TTL > 0 && res.TTL < sleep {
			sleep = res.TTL
		}
		if q := br.QueueTTL / 3; br.Fair && q > 0 && q < sleep {
			sleep = q
		}
		timer := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
		case <-s.closing:
		case <-wake:
		case <-timer.C:
		}
		timer.Stop()
		stop()
		if ctx.Err() != nil || s.isClosing() {
			return driver.Result{TTL: res.TTL}, nil
		}
	}
}

func (s *Server) isClosing() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// hold parses a hold endpoint's body and finds the operations of its kind.
func (s *Server) hold(k kind, op string, r *http.Request) (request, ops, *httpError) {
	req, herr := s.parse(k, op, r)
	if herr != nil {
		return req, ops{}, herr
	}
	o, herr := s.ops(k, &req)
	return req, o, herr
}

func (s *Server) release(k kind) handler {
	return func(ctx context.Context, t *tenant, r *http.Request) (any, *httpError) {
		req, o, herr := s.hold(k, "release", r)
		if herr != nil {
			return nil, herr
		}
		key, owner := t.bkey(req.Key), holder(t, req.Owner)
		err := o.release(ctx, key, owner)
		t.released(holdID(k, key, owner, req.Mode))
		if err != nil {
			return nil, backendError(err)
		}
		return wire.Grant{Key: req.Key, Owner: req.Owner, Mode: req.Mode}, nil
	}
}

func (s *Server) extend(k kind) handler {
	return func(ctx context.Context, t *tenant, r *http.Request) (any, *httpError) {
		req, o, herr := s.hold(k, "extend", r)
		if herr != nil {
			return nil, herr
		}
		key, owner := t.bkey(req.Key), holder(t, req.Owner)
		lease := time.Duration(req.LeaseMS) * time.Millisecond
		start := time.Now()
		err := o.extend(ctx, key, owner, lease)
		id := holdID(k, key, owner, req.Mode)
		if err != nil {
			if errors.Is(err, lockx.ErrNotHeld) {
				t.released(id)
			}
			return nil, backendError(err)
		}
		t.extended(id, start.Add(lease))
		return wire.Grant{Key: req.Key, Owner: req.Owner, LeaseMS: req.LeaseMS, Mode: req.Mode}, nil
	}
}

// ttl reports the remaining lease of a lock held by owner.
func (s *Server) ttl(ctx context.Context, t *tenant, r *http.Request) (any, *httpError) {
	req, herr := s.parse(kindLock, "ttl", r)
	if herr != nil {
		return nil, herr
	}
	d, err := s.b.TTL(ctx, t.bkey(req.Key), holder(t, req.Owner))
	if err != nil {
		return nil, backendError(err)
	}
	return wire.Grant{Key: req.Key, Owner: req.Owner, TTLMS: max(1, d.Milliseconds())}, nil
}

func (s *Server) extendMany(ctx context.Context, t *tenant, r *http.Request) (any, *httpError) {
	var b wire.Batch
	if herr := parseBody(r, maxBatchBody, &b); herr != nil {
		return nil, herr
	}
	if len(b.Locks) == 0 || len(b.Locks) > wire.MaxBatch {
		return nil, badRequest("locks must hold 1 to %d renewals", wire.MaxBatch)
	}
	reqs := make([]driver.ExtendRequest, len(b.Locks))
	for i, it := range b.Locks {
		if err := checkKey("key", it.Key, maxKeyLen); err != nil {
			return nil, badRequest("locks[%d]: %v", i, err)
		}
		if err := checkKey("owner", it.Owner, maxOwnerLen); err != nil {
			return nil, badRequest("locks[%d]: %v", i, err)
		}
		if herr := s.checkLease("lease_ms", it.LeaseMS); herr != nil {
			herr.detail = fmt.Sprintf("locks[%d]: %s", i, herr.detail)
			return nil, herr
		}
		reqs[i] = driver.ExtendRequest{Key: t.bkey(it.Key), Owner: holder(t, it.Owner), Lease: time.Duration(it.LeaseMS) * time.Millisecond}
	}
	start := time.Now()
	var errs []error
	var be driver.BatchExtender
	if driver.As(s.b, &be) {
		errs = be.ExtendMany(ctx, reqs)
	} else {
		errs = make([]error, len(reqs))
		for i, q := range reqs {
			errs[i] = s.b.Extend(ctx, q.Key, q.Owner, q.Lease)
		}
	}
	out := make([]wire.BatchResult, len(reqs))
	for i, q := range reqs {
		var err error
		if i < len(errs) {
			err = errs[i]
		} else {
			err = driver.Unavailable("extend", errors.New("batch returned too few results"))
		}
		id := holdID(kindLock, q.Key, q.Owner, "")
		if err == nil {
			t.extended(id, start.Add(q.Lease))
			out[i] = wire.BatchResult{Status: http.StatusOK}
			continue
		}
		if errors.Is(err, lockx.ErrNotHeld) {
			t.released(id)
		}
		e := backendError(err)
		out[i] = wire.BatchResult{Status: e.status, Code: e.code, Detail: e.detail}
	}
	return wire.BatchResults{Results: out}, nil
}

// fence checks a fencing token for a resource of the tenant with the
// backend's FenceStore.
func (s *Server) fence(ctx context.Context, t *tenant, r *http.Request) (any, *httpError) {
	var fs driver.FenceStore
	ok := driver.As(s.b, &fs)
	if !ok {
		return nil, unsupported("fencing checks")
	}
	var req wire.Fence
	if herr := parseBody(r, maxBody, &req); herr != nil {
		return nil, herr
	}
	if err := checkKey("resource", req.Resource, maxKeyLen); err != nil {
		return nil, badRequest("%v", err)
	}
	tok, err := lockx.ParseToken(req.Token)
	if err != nil {
		return nil, backendError(err)
	}
	if herr := t.verify(req.Resource, tok, req.Signature); herr != nil {
		return nil, herr
	}
	if err := fs.Fence(ctx, ns(t)+req.Resource, tok); err != nil {
		return nil, backendError(err)
	}
	return wire.Fence{Resource: req.Resource, Token: tok.String()}, nil
}
