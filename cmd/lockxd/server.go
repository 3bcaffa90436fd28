package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/lockx-go/lockx/lockx"
)

//go:embed openapi.yaml
var openAPI []byte

const (
	maxBody     = 16 << 10
	maxKeyLen   = 512
	maxOwnerLen = 128
)

// Config is the server's policy.
type Config struct {
	MaxLease time.Duration // longest lease a client may ask for
	MaxWait  time.Duration // longest long-poll
	Tenants  []TenantConfig
	Logger   *slog.Logger
	// MeterProvider, if set, receives the same per-tenant metrics as OTel
	// instruments (lockxd.requests, lockxd.request.duration, lockxd.held).
	MeterProvider metric.MeterProvider
}

// Server is lockxd's HTTP handler over one backend. It keeps no lock state
// of its own: a hold is (key, owner) in the backend, so a restart loses
// nothing and the client's keep-alives (extend) are what keep it alive.
type Server struct {
	b       lockx.Backend
	cfg     Config
	auth    *authenticator
	mux     *http.ServeMux
	metrics *metrics
	log     *slog.Logger
	closing atomic.Bool
}

// NewServer returns the handler.
func NewServer(b lockx.Backend, cfg Config) *Server {
	if cfg.MaxLease <= 0 {
		cfg.MaxLease = 10 * time.Minute
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{b: b, cfg: cfg, auth: newAuthenticator(cfg.Tenants), mux: http.NewServeMux(), metrics: newMetrics(), log: cfg.Logger}
	if cfg.MeterProvider != nil {
		s.metrics.otel(cfg.MeterProvider, s.auth)
	}
	s.mux.HandleFunc("GET /healthz", s.health)
	s.mux.HandleFunc("GET /metrics", s.serveMetrics)
	s.mux.HandleFunc("GET /openapi.yaml", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(openAPI)
	})
	for _, k := range []kind{kindLock, kindRW, kindSem} {
		base := "/v1/" + k.path()
		s.mux.HandleFunc("POST "+base+"/acquire", s.api(k, "acquire", s.acquire(k, true)))
		s.mux.HandleFunc("POST "+base+"/try-acquire", s.api(k, "try-acquire", s.acquire(k, false)))
		s.mux.HandleFunc("POST "+base+"/release", s.api(k, "release", s.release(k)))
		s.mux.HandleFunc("POST "+base+"/extend", s.api(k, "extend", s.extend(k)))
	}
	s.mux.HandleFunc("GET /v1/locks", s.api(kindLock, "inspect", s.inspect))
	s.mux.HandleFunc("GET /v1/semaphores/usage", s.api(kindSem, "usage", s.usage))
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Shutdown makes health report draining; long-polls end at their deadline.
func (s *Server) Shutdown() { s.closing.Store(true) }

type kind int

const (
	kindLock kind = iota
	kindRW
	kindSem
)

func (k kind) path() string { return [...]string{"locks", "rwlocks", "semaphores"}[k] }

// ns is the backend key prefix of each kind; the tenant follows it, so no
// client-chosen key can reach another tenant's keys.
func (k kind) ns(t *tenant) string {
	return "lockxd/" + [...]string{"l", "rw", "s"}[k] + "/" + t.name + "/"
}

// request is the JSON body of every POST. Fields that an endpoint does not
// use are rejected by validate.
type request struct {
	Key     string `json:"key"`
	Owner   string `json:"owner,omitempty"`
	LeaseMS int64  `json:"lease_ms,omitempty"`
	WaitMS  int64  `json:"wait_ms,omitempty"`
	Fair    bool   `json:"fair,omitempty"`
	Mode    string `json:"mode,omitempty"`
	Limit   int64  `json:"limit,omitempty"`
	Count   int64  `json:"count,omitempty"`
}

// response is a grant, extension or release.
type response struct {
	Key     string `json:"key"`
	Owner   string `json:"owner"`
	Token   string `json:"token,omitempty"` // fencing token, decimal (fits uint64)
	LeaseMS int64  `json:"lease_ms,omitempty"`
	Mode    string `json:"mode,omitempty"`
	Count   int64  `json:"count,omitempty"`
}

// problem is an RFC 9457 problem document.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

type httpError struct {
	status     int
	title      string
	detail     string
	retryAfter time.Duration
}

func (e *httpError) Error() string { return e.title + ": " + e.detail }

func badRequest(format string, a ...any) *httpError {
	return &httpError{status: http.StatusBadRequest, title: "bad request", detail: fmt.Sprintf(format, a...)}
}

func writeProblem(w http.ResponseWriter, e *httpError) {
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(e.retryAfter.Seconds()))))
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(problem{Type: "about:blank", Title: e.title, Status: e.status, Detail: e.detail})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// decodeRequest reads one JSON object, at most maxBody bytes, no unknown
// fields, nothing after it.
func decodeRequest(r io.Reader) (request, error) {
	var req request
	dec := json.NewDecoder(io.LimitReader(r, maxBody+1))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return request{}, fmt.Errorf("malformed JSON body: %v", err)
	}
	if dec.More() {
		return request{}, errors.New("malformed JSON body: data after the object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return request{}, errors.New("malformed JSON body: data after the object")
	}
	return req, nil
}

func checkKey(name, key string, max int) error {
	switch {
	case key == "":
		return fmt.Errorf("%s is empty", name)
	case len(key) > max:
		return fmt.Errorf("%s is %d bytes, longer than %d", name, len(key), max)
	case !utf8.ValidString(key):
		return fmt.Errorf("%s is not valid UTF-8", name)
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%s contains a control character", name)
		}
	}
	return nil
}

type handler func(ctx context.Context, t *tenant, r *http.Request) (any, *httpError)

// api wraps an endpoint with authentication, rate limiting, body checks,
// metrics and error mapping.
func (s *Server) api(k kind, op string, h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		t, herr := s.authenticate(r)
		tenantName := ""
		if t != nil {
			tenantName = t.name
		}
		status := http.StatusOK
		defer func() { s.metrics.observe(tenantName, k.path(), op, status, time.Since(start)) }()
		if herr == nil {
			if ok, wait := t.allow(start); !ok {
				herr = &httpError{status: http.StatusTooManyRequests, title: "rate limited", detail: fmt.Sprintf("tenant %s is over its request rate", t.name), retryAfter: wait}
			}
		}
		if herr == nil {
			r.Body = http.MaxBytesReader(w, r.Body, maxBody)
			var v any
			v, herr = h(r.Context(), t, r)
			if herr == nil {
				writeJSON(w, v)
				return
			}
		}
		status = herr.status
		writeProblem(w, herr)
	}
}

func (s *Server) authenticate(r *http.Request) (*tenant, *httpError) {
	key := r.Header.Get("X-API-Key")
	if a := r.Header.Get("Authorization"); key == "" && a != "" {
		scheme, tok, _ := strings.Cut(a, " ")
		if !strings.EqualFold(scheme, "Bearer") {
			return nil, &httpError{status: http.StatusUnauthorized, title: "unauthorized", detail: "Authorization must be Bearer"}
		}
		key = strings.TrimSpace(tok)
	}
	if key == "" {
		return nil, &httpError{status: http.StatusUnauthorized, title: "unauthorized", detail: "missing API key (X-API-Key or Authorization: Bearer)"}
	}
	t := s.auth.lookup(key)
	if t == nil {
		return nil, &httpError{status: http.StatusUnauthorized, title: "unauthorized", detail: "unknown API key"}
	}
	return t, nil
}

// parse decodes and validates a POST body for op.
func (s *Server) parse(k kind, op string, r *http.Request) (request, *httpError) {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return request{}, &httpError{status: http.StatusUnsupportedMediaType, title: "unsupported media type", detail: "want application/json"}
	}
	req, err := decodeRequest(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) || strings.Contains(err.Error(), "request body too large") {
			return request{}, &httpError{status: http.StatusRequestEntityTooLarge, title: "body too large", detail: fmt.Sprintf("limit is %d bytes", maxBody)}
		}
		return request{}, badRequest("%v", err)
	}
	return req, s.validate(k, op, &req)
}

func (s *Server) validate(k kind, op string, req *request) *httpError {
	if err := checkKey("key", req.Key, maxKeyLen); err != nil {
		return badRequest("%v", err)
	}
	acquire := op == "acquire" || op == "try-acquire"
	if req.Owner != "" || !acquire {
		if err := checkKey("owner", req.Owner, maxOwnerLen); err != nil {
			return badRequest("%v", err)
		}
	}
	if acquire || op == "extend" {
		if req.LeaseMS <= 0 {
			return badRequest("lease_ms must be positive")
		}
		if time.Duration(req.LeaseMS) > s.cfg.MaxLease/time.Millisecond {
			return badRequest("lease_ms %d exceeds the server's maximum %d", req.LeaseMS, s.cfg.MaxLease.Milliseconds())
		}
	} else if req.LeaseMS != 0 {
		return badRequest("lease_ms is not used by %s", op)
	}
	switch {
	case op == "acquire":
		if req.WaitMS < 0 || time.Duration(req.WaitMS) > s.cfg.MaxWait/time.Millisecond {
			return badRequest("wait_ms must be in [0, %d]", s.cfg.MaxWait.Milliseconds())
		}
	case req.WaitMS != 0:
		return badRequest("wait_ms is only for acquire")
	case req.Fair && !acquire:
		return badRequest("fair is only for acquire")
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

func mode(m string) lockx.RWMode {
	if m == "read" {
		return lockx.ModeRead
	}
	return lockx.ModeWrite
}

// backendError maps a backend error to HTTP.
func backendError(err error) *httpError {
	switch {
	case errors.Is(err, lockx.ErrNotHeld):
		return &httpError{status: http.StatusNotFound, title: "not held", detail: "this owner does not hold the key (released, or its lease expired)"}
	case errors.Is(err, lockx.ErrInvalidArgument):
		return badRequest("%s", strings.TrimPrefix(err.Error(), "lockx: "))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &httpError{status: http.StatusServiceUnavailable, title: "cancelled", detail: "request cancelled"}
	default:
		return &httpError{status: http.StatusServiceUnavailable, title: "backend unavailable", detail: strings.TrimPrefix(err.Error(), "lockx: "), retryAfter: time.Second}
	}
}

func (s *Server) unsupported(k kind) *httpError {
	return &httpError{status: http.StatusNotImplemented, title: "not supported", detail: "the configured backend does not support " + k.path()}
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
		req, herr := s.parse(k, op, r)
		if herr != nil {
			return nil, herr
		}
		var attempt func(ctx context.Context, br lockx.Request) (lockx.Result, error)
		var withdraw func(ctx context.Context, key string, owner lockx.Owner) error
		switch k {
		case kindLock:
			attempt, withdraw = s.b.Acquire, s.b.Release
		case kindRW:
			rb, ok := s.b.(lockx.RWBackend)
			if !ok {
				return nil, s.unsupported(k)
			}
			m := mode(req.Mode)
			attempt = func(ctx context.Context, br lockx.Request) (lockx.Result, error) { return rb.AcquireRW(ctx, m, br) }
			withdraw = func(ctx context.Context, key string, o lockx.Owner) error { return rb.ReleaseRW(ctx, m, key, o) }
		case kindSem:
			sb, ok := s.b.(lockx.SemaphoreBackend)
			if !ok {
				return nil, s.unsupported(k)
			}
			attempt = func(ctx context.Context, br lockx.Request) (lockx.Result, error) {
				return sb.AcquirePermits(ctx, lockx.PermitRequest{Request: br, Limit: req.Limit, Count: req.Count})
			}
			withdraw = sb.ReleasePermits
		}
		owner := lockx.Owner(req.Owner)
		if owner == "" {
			owner = lockx.NewOwner()
		}
		lease := time.Duration(req.LeaseMS) * time.Millisecond
		key := k.ns(t) + req.Key
		id := holdID(k, key, owner, req.Mode)
		if !t.reserve(id, time.Now()) {
			return nil, &httpError{status: http.StatusTooManyRequests, title: "quota exceeded", detail: fmt.Sprintf("tenant %s holds its maximum of %d locks", t.name, t.cfg.MaxHeld), retryAfter: time.Second}
		}
		granted := false
		var expiry time.Time
		defer func() { t.settle(id, granted, expiry) }()

		br := lockx.Request{Key: key, Owner: owner, Lease: lease, Fair: req.Fair, Wait: wait && req.WaitMS > 0}
		start := time.Now()
		res, err := attempt(ctx, br)
		if err == nil && !res.Acquired && br.Wait {
			if !t.startWait() {
				if br.Fair {
					_ = withdraw(context.WithoutCancel(ctx), key, owner)
				}
				return nil, &httpError{status: http.StatusTooManyRequests, title: "quota exceeded", detail: fmt.Sprintf("tenant %s has its maximum of %d waiters", t.name, t.cfg.MaxWaiters), retryAfter: time.Second}
			}
			res, err = s.longPoll(ctx, br, res, time.Duration(req.WaitMS)*time.Millisecond, attempt)
			t.endWait()
			if err != nil || !res.Acquired {
				// Leave the queue, so the next waiter is not stalled, and
				// free a grant whose reply was lost to the deadline: the
				// client is told 409, so nobody must hold as this owner.
				wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
				_ = withdraw(wctx, key, owner)
				cancel()
			}
		}
		if err != nil {
			return nil, backendError(err)
		}
		if !res.Acquired {
			e := &httpError{status: http.StatusConflict, title: "not acquired", detail: "the key is held by another owner"}
			if res.TTL > 0 {
				e.retryAfter = res.TTL
			}
			return nil, e
		}
		granted, expiry = true, start.Add(lease)
		return response{Key: req.Key, Owner: string(owner), Token: res.Token.String(), LeaseMS: lease.Milliseconds(), Mode: req.Mode, Count: req.Count}, nil
	}
}

// longPoll retries a refused attempt until it is granted or wait elapses
// (or the client goes away). With a Notifier backend it sleeps until the
// key's release wakes it; otherwise it polls with backoff bounded by the
// holder's TTL.
func (s *Server) longPoll(ctx context.Context, br lockx.Request, res lockx.Result, wait time.Duration, attempt func(context.Context, lockx.Request) (lockx.Result, error)) (lockx.Result, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	n, _ := s.b.(lockx.Notifier)
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
				return lockx.Result{TTL: lastTTL}, nil // wait elapsed: not acquired
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
		timer := time.NewTimer(sleep)
		select {
		case <-ctx.Done():
			timer.Stop()
			stop()
			return lockx.Result{TTL: res.TTL}, nil
		case <-wake:
		case <-timer.C:
		}
		timer.Stop()
		stop()
	}
}

func (s *Server) release(k kind) handler {
	return func(ctx context.Context, t *tenant, r *http.Request) (any, *httpError) {
		req, herr := s.parse(k, "release", r)
		if herr != nil {
			return nil, herr
		}
		key, owner := k.ns(t)+req.Key, lockx.Owner(req.Owner)
		var err error
		switch k {
		case kindLock:
			err = s.b.Release(ctx, key, owner)
		case kindRW:
			rb, ok := s.b.(lockx.RWBackend)
			if !ok {
				return nil, s.unsupported(k)
			}
			err = rb.ReleaseRW(ctx, mode(req.Mode), key, owner)
		case kindSem:
			sb, ok := s.b.(lockx.SemaphoreBackend)
			if !ok {
				return nil, s.unsupported(k)
			}
			err = sb.ReleasePermits(ctx, key, owner)
		}
		t.released(holdID(k, key, owner, req.Mode))
		if err != nil {
			return nil, backendError(err)
		}
		return response{Key: req.Key, Owner: req.Owner, Mode: req.Mode}, nil
	}
}

func (s *Server) extend(k kind) handler {
	return func(ctx context.Context, t *tenant, r *http.Request) (any, *httpError) {
		req, herr := s.parse(k, "extend", r)
		if herr != nil {
			return nil, herr
		}
		key, owner := k.ns(t)+req.Key, lockx.Owner(req.Owner)
		lease := time.Duration(req.LeaseMS) * time.Millisecond
		start := time.Now()
		var err error
		switch k {
		case kindLock:
			err = s.b.Extend(ctx, key, owner, lease)
		case kindRW:
			rb, ok := s.b.(lockx.RWBackend)
			if !ok {
				return nil, s.unsupported(k)
			}
			err = rb.ExtendRW(ctx, mode(req.Mode), key, owner, lease)
		case kindSem:
			sb, ok := s.b.(lockx.SemaphoreBackend)
			if !ok {
				return nil, s.unsupported(k)
			}
			err = sb.ExtendPermits(ctx, key, owner, lease)
		}
		id := holdID(k, key, owner, req.Mode)
		if err != nil {
			if errors.Is(err, lockx.ErrNotHeld) {
				t.released(id)
			}
			return nil, backendError(err)
		}
		t.extended(id, start.Add(lease))
		return response{Key: req.Key, Owner: req.Owner, LeaseMS: req.LeaseMS, Mode: req.Mode}, nil
	}
}

// lockView is the inspector's view of one lock, with the tenant's
// namespace stripped.
type lockView struct {
	Key     string `json:"key"`
	Owner   string `json:"owner"`
	Token   string `json:"token"`
	TTLMS   int64  `json:"ttl_ms"`
	AgeMS   int64  `json:"age_ms"`
	Waiters int    `json:"waiters"`
}

func (s *Server) inspect(ctx context.Context, t *tenant, r *http.Request) (any, *httpError) {
	in, ok := s.b.(lockx.Inspector)
	if !ok {
		return nil, &httpError{status: http.StatusNotImplemented, title: "not supported", detail: "the configured backend cannot list locks"}
	}
	q := r.URL.Query()
	ns := kindLock.ns(t)
	if key := q.Get("key"); key != "" {
		if err := checkKey("key", key, maxKeyLen); err != nil {
			return nil, badRequest("%v", err)
		}
		li, err := in.Lock(ctx, ns+key)
		if err != nil {
			return nil, backendError(err)
		}
		return view(ns, li), nil
	}
	prefix := q.Get("prefix")
	if len(prefix) > maxKeyLen || !utf8.ValidString(prefix) {
		return nil, badRequest("bad prefix")
	}
	limit := 1000
	out := []lockView{}
	err := in.Locks(ctx, ns+prefix, func(li lockx.LockInfo) bool {
		if strings.HasPrefix(li.Key, ns) {
			out = append(out, view(ns, li))
		}
		return len(out) < limit
	})
	if err != nil {
		return nil, backendError(err)
	}
	return map[string]any{"locks": out, "truncated": len(out) >= limit}, nil
}

func view(ns string, li lockx.LockInfo) lockView {
	return lockView{Key: strings.TrimPrefix(li.Key, ns), Owner: string(li.Owner), Token: li.Token.String(), TTLMS: li.TTL.Milliseconds(), AgeMS: li.Age.Milliseconds(), Waiters: li.Waiters}
}

func (s *Server) usage(ctx context.Context, t *tenant, r *http.Request) (any, *httpError) {
	sb, ok := s.b.(lockx.SemaphoreBackend)
	if !ok {
		return nil, s.unsupported(kindSem)
	}
	key := r.URL.Query().Get("key")
	if err := checkKey("key", key, maxKeyLen); err != nil {
		return nil, badRequest("%v", err)
	}
	u, err := sb.Permits(ctx, kindSem.ns(t)+key)
	if err != nil {
		return nil, backendError(err)
	}
	return map[string]int64{"in_use": u.InUse, "holders": u.Holders, "waiting": u.Waiting}, nil
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if s.closing.Load() {
		writeProblem(w, &httpError{status: http.StatusServiceUnavailable, title: "draining", detail: "server is shutting down"})
		return
	}
	// A probe of the backend: TTL of a key nobody holds answers ErrNotHeld
	// when the backend is reachable.
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	_, err := s.b.TTL(ctx, "lockxd/health", "lockxd-health")
	if err != nil && !errors.Is(err, lockx.ErrNotHeld) {
		writeProblem(w, &httpError{status: http.StatusServiceUnavailable, title: "backend unavailable", detail: err.Error()})
		return
	}
	writeJSON(w, map[string]string{"status": "ok"})
}

// metrics are Prometheus text-format counters per tenant.
type metrics struct {
	mu       sync.Mutex
	requests map[[4]string]uint64 // tenant, kind, op, status
	seconds  map[[3]string]float64

	otelRequests metric.Int64Counter
	otelDuration metric.Float64Histogram
}

// otel registers the OTel instruments; errors leave them unset.
func (m *metrics) otel(mp metric.MeterProvider, a *authenticator) {
	meter := mp.Meter("github.com/lockx-go/lockx/cmd/lockxd")
	m.otelRequests, _ = meter.Int64Counter("lockxd.requests", metric.WithDescription("API requests by tenant, kind, operation and HTTP status"))
	m.otelDuration, _ = meter.Float64Histogram("lockxd.request.duration", metric.WithUnit("s"), metric.WithDescription("API request latency, long-polls included"))
	_, _ = meter.Int64ObservableGauge("lockxd.held", metric.WithDescription("holds granted through this server and not yet released or expired"),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			now := time.Now()
			for _, name := range sortedNames(a.tenants) {
				o.Observe(int64(a.tenants[name].heldCount(now)), metric.WithAttributes(attribute.String("tenant", name)))
			}
			return nil
		}))
}

func newMetrics() *metrics {
	return &metrics{requests: map[[4]string]uint64{}, seconds: map[[3]string]float64{}}
}

func (m *metrics) observe(tenant, k, op string, status int, d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests[[4]string{tenant, k, op, strconv.Itoa(status)}]++
	m.seconds[[3]string{tenant, k, op}] += d.Seconds()
	if m.otelRequests != nil {
		ctx := context.Background()
		attrs := metric.WithAttributes(attribute.String("tenant", tenant), attribute.String("kind", k), attribute.String("op", op))
		m.otelRequests.Add(ctx, 1, attrs, metric.WithAttributes(attribute.Int("status", status)))
		m.otelDuration.Record(ctx, d.Seconds(), attrs)
	}
}

func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	m := s.metrics
	m.mu.Lock()
	defer m.mu.Unlock()
	fmt.Fprintln(w, "# HELP lockxd_requests_total API requests by tenant, kind, operation and HTTP status.")
	fmt.Fprintln(w, "# TYPE lockxd_requests_total counter")
	for _, k := range sortedKeys4(m.requests) {
		fmt.Fprintf(w, "lockxd_requests_total{tenant=%q,kind=%q,op=%q,status=%q} %d\n", k[0], k[1], k[2], k[3], m.requests[k])
	}
	fmt.Fprintln(w, "# HELP lockxd_request_seconds_total Time spent serving API requests (including long-polls).")
	fmt.Fprintln(w, "# TYPE lockxd_request_seconds_total counter")
	for _, k := range sortedKeys3(m.seconds) {
		fmt.Fprintf(w, "lockxd_request_seconds_total{tenant=%q,kind=%q,op=%q} %g\n", k[0], k[1], k[2], m.seconds[k])
	}
	fmt.Fprintln(w, "# HELP lockxd_held Holds granted through this server and not yet released or expired, by tenant.")
	fmt.Fprintln(w, "# TYPE lockxd_held gauge")
	now := time.Now()
	for _, name := range sortedNames(s.auth.tenants) {
		fmt.Fprintf(w, "lockxd_held{tenant=%q} %d\n", name, s.auth.tenants[name].heldCount(now))
	}
}
