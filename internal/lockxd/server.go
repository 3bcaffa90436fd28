package lockxd

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
	"time"
	"unicode/utf8"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/lockx-go/lockx/internal/lockxd/wire"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

//go:embed openapi.yaml
var openAPI []byte

// OpenAPI returns the API's OpenAPI 3.1 document, as served at
// GET /openapi.yaml.
func OpenAPI() []byte { return openAPI }

const (
	maxBody      = 16 << 10
	maxBatchBody = 1 << 20
	maxKeyLen    = 512
	maxOwnerLen  = 128
)

// Config is the server's policy.
type Config struct {
	MaxLease time.Duration // longest lease a client may ask for (default 10m)
	MaxWait  time.Duration // longest long-poll or watch stream (default 1m)
	Tenants  []TenantConfig
	Logger   *slog.Logger
	// Readers receive the server's per-tenant OTel metrics
	// (lockxd.requests, lockxd.request.duration, lockxd.held,
	// lockxd.waiting) besides GET /metrics, which always serves them: a
	// PeriodicReader over any exporter, for a program that embeds the
	// server. Close shuts them down.
	Readers []sdkmetric.Reader
	// TokenSigningKey, if set (at least lockx.MinSigningKeyLen bytes),
	// makes the server sign every grant's fencing token with the tenant's
	// key, TenantSigningKey(TokenSigningKey, tenant), and require a valid
	// signature at POST /v1/fence (docs/lockxd.md, "Signed tokens").
	TokenSigningKey []byte
	// KeySalt, if set, appends to every backend key a tag keyed by it
	// (keytag.go), so that no tenant can compute a key name whose backend
	// hash (pglock's advisory-lock id) equals another tenant's key's. Every
	// replica over one backend needs the same salt; setting or changing it
	// changes every backend key (docs/lockxd.md, "Key tags").
	KeySalt []byte
}

// Server is lockxd's HTTP handler over one backend. It keeps no lock state
// of its own: a hold is (key, owner) in the backend, so a restart loses
// nothing and the client's keep-alives (extend) are what keep it alive.
type Server struct {
	b       driver.Backend
	cfg     Config
	auth    *authenticator
	mux     *http.ServeMux
	metrics *metrics
	log     *slog.Logger

	routes  map[string]string // path -> method, for 405s
	streams streams

	closeOnce sync.Once
	closing   chan struct{} // closed by Shutdown: health drains, waits end
}

// NewServer returns the handler.
func NewServer(b driver.Backend, cfg Config) *Server {
	if cfg.MaxLease <= 0 {
		cfg.MaxLease = 10 * time.Minute
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{b: b, cfg: cfg, auth: newAuthenticator(cfg.Tenants), mux: http.NewServeMux(), log: cfg.Logger, closing: make(chan struct{}), routes: map[string]string{}}
	s.metrics = newMetrics(s.auth, cfg.Readers)
	for _, t := range s.auth.tenants {
		t.salt = cfg.KeySalt
	}
	if cfg.TokenSigningKey != nil {
		for _, t := range s.auth.tenants {
			// NewServer has no error to return: a short key signs with
			// nothing and refuses every fence (cmd/lockxd checks it first).
			t.signer, _ = lockx.NewTokenSigner(TenantSigningKey(cfg.TokenSigningKey, t.name))
			t.signing = true
		}
	}
	s.handle("GET", "/healthz", s.health)
	s.handle("GET", "/metrics", s.serveMetrics)
	s.handle("GET", "/openapi.yaml", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(openAPI)
	})
	for _, k := range []kind{kindLock, kindRW, kindSem} {
		base := "/v1/" + k.path()
		s.handle("POST", base+"/acquire", s.api(k, "acquire", s.acquire(k, true)))
		s.handle("POST", base+"/try-acquire", s.api(k, "try-acquire", s.acquire(k, false)))
		s.handle("POST", base+"/release", s.api(k, "release", s.release(k)))
		s.handle("POST", base+"/extend", s.api(k, "extend", s.extend(k)))
	}
	s.handle("POST", "/v1/locks/ttl", s.api(kindLock, "ttl", s.ttl))
	s.handle("POST", "/v1/locks/extend-many", s.api(kindLock, "extend-many", s.extendMany))
	s.handle("POST", "/v1/locks/acquire-many", s.api(kindLock, "acquire-many", s.acquireMany))
	s.handle("GET", "/v1/locks", s.api(kindLock, "inspect", s.inspect))
	s.handle("GET", "/v1/semaphores/usage", s.api(kindSem, "usage", s.usage))
	s.handle("POST", "/v1/fence", s.api(kindFence, "fence", s.fence))
	s.handle("GET", "/v1/watch", s.watch)
	s.handle("POST", "/v1/watch/cancel", s.watchCancel)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if m, ok := s.routes[r.URL.Path]; ok {
			w.Header().Set("Allow", m)
			writeProblem(w, &httpError{status: http.StatusMethodNotAllowed, code: "method-not-allowed", title: "method not allowed", detail: "use " + m})
			return
		}
		writeProblem(w, &httpError{status: http.StatusNotFound, code: "not-found", title: "not found", detail: "no such endpoint: see /openapi.yaml"})
	})
	return s
}

func (s *Server) handle(method, path string, h http.HandlerFunc) {
	s.routes[path] = method
	s.mux.HandleFunc(method+" "+path, h)
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		// A panic is a bug, but it must not take the process and every
		// tenant's waits down with it, nor show as a bare connection reset.
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("lockxd: panic", "path", r.URL.Path, "panic", v)
			writeProblem(w, &httpError{status: http.StatusInternalServerError, code: "internal", title: "internal error"})
		}
	}()
	s.mux.ServeHTTP(w, r)
}

// Close shuts the server's metrics down, flushing Config.Readers. Call it
// after the HTTP server has stopped.
func (s *Server) Close(ctx context.Context) error { return s.metrics.mp.Shutdown(ctx) }

// Shutdown makes health report draining and ends watch streams and
// long-polls; it does not wait for them (http.Server.Shutdown does).
func (s *Server) Shutdown() { s.closeOnce.Do(func() { close(s.closing) }) }

type kind int

const (
	kindLock kind = iota
	kindRW
	kindSem
	kindFence
)

func (k kind) path() string { return [...]string{"locks", "rwlocks", "semaphores", "fence"}[k] }

// ns is the backend key prefix of a tenant. Every client-chosen key is
// appended to it, so no key can reach another tenant's keys. Kinds share
// it: a backend keeps read/write locks, semaphores and plain locks of one
// key string apart (the RWBackend and SemaphoreBackend contracts), and one
// key string for all kinds lets a watch stream wake every kind of waiter.
func ns(t *tenant) string { return "lockxd/" + t.name + "/" }

type httpError struct {
	status     int
	code       string
	title      string
	detail     string
	retryAfter time.Duration
	ttl        time.Duration
	seen       lockx.Token
}

func (e *httpError) Error() string { return e.title + ": " + e.detail }

func badRequest(format string, a ...any) *httpError {
	return &httpError{status: http.StatusBadRequest, code: "invalid-argument", title: "bad request", detail: fmt.Sprintf(format, a...)}
}

func writeProblem(w http.ResponseWriter, e *httpError) {
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(e.retryAfter.Seconds()))))
	}
	p := wire.Problem{Type: wire.ProblemType + e.code, Title: e.title, Status: e.status, Detail: e.detail, Code: e.code}
	if e.ttl > 0 {
		p.TTLMS = max(1, e.ttl.Milliseconds())
	}
	if e.seen != 0 {
		p.Seen = e.seen.String()
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(e.status)
	_ = json.NewEncoder(w).Encode(p)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// decodeJSON reads one JSON object into v, at most limit bytes, no unknown
// fields, nothing after it.
func decodeJSON(r io.Reader, limit int64, v any) error {
	dec := json.NewDecoder(io.LimitReader(r, limit+1))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("malformed JSON body: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("malformed JSON body: data after the object")
	}
	return nil
}

// decodeRequest decodes the body of a hold endpoint.
func decodeRequest(r io.Reader) (request, error) {
	var req request
	err := decodeJSON(r, maxBody, &req)
	return req, err
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
	limit := int64(maxBody)
	if op == "extend-many" || op == "acquire-many" {
		limit = maxBatchBody
	}
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		status := http.StatusOK
		t, herr := s.admit(r, start)
		defer func() { s.metrics.observe(t.nameOrEmpty(), k.path(), op, status, time.Since(start)) }()
		if herr == nil {
			if r.Method == http.MethodPost {
				r.Body = http.MaxBytesReader(w, r.Body, limit)
			}
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

// admit authenticates r and charges its tenant's rate limit.
func (s *Server) admit(r *http.Request, now time.Time) (*tenant, *httpError) {
	t, herr := s.authenticate(r)
	if herr != nil {
		return nil, herr
	}
	if ok, wait := t.allow(now); !ok {
		return t, &httpError{status: http.StatusTooManyRequests, code: "rate-limited", title: "rate limited", detail: fmt.Sprintf("tenant %s is over its request rate", t.name), retryAfter: wait}
	}
	return t, nil
}

func (s *Server) authenticate(r *http.Request) (*tenant, *httpError) {
	unauthorized := func(detail string) *httpError {
		return &httpError{status: http.StatusUnauthorized, code: "unauthorized", title: "unauthorized", detail: detail}
	}
	key := r.Header.Get("X-API-Key")
	if a := r.Header.Get("Authorization"); key == "" && a != "" {
		scheme, tok, _ := strings.Cut(a, " ")
		if !strings.EqualFold(scheme, "Bearer") {
			return nil, unauthorized("Authorization must be Bearer")
		}
		key = strings.TrimSpace(tok)
	}
	if key == "" {
		return nil, unauthorized("missing API key (X-API-Key or Authorization: Bearer)")
	}
	t := s.auth.lookup(key)
	if t == nil {
		return nil, unauthorized("unknown API key")
	}
	return t, nil
}

// parseBody checks the media type and decodes a POST body into v.
func parseBody(r *http.Request, limit int64, v any) *httpError {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return &httpError{status: http.StatusUnsupportedMediaType, code: "unsupported-media-type", title: "unsupported media type", detail: "want application/json"}
	}
	if err := decodeJSON(r.Body, limit, v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) || strings.Contains(err.Error(), "request body too large") {
			return &httpError{status: http.StatusRequestEntityTooLarge, code: "too-large", title: "body too large", detail: fmt.Sprintf("limit is %d bytes", limit)}
		}
		return badRequest("%v", err)
	}
	return nil
}

// backendError maps a backend error to HTTP.
func backendError(err error) *httpError {
	var stale *lockx.StaleTokenError
	switch {
	case errors.As(err, &stale):
		return &httpError{status: http.StatusConflict, code: "stale-token", title: "stale fencing token", detail: fmt.Sprintf("token %d is below %d, already accepted", stale.Token, stale.Seen), seen: stale.Seen}
	case errors.Is(err, lockx.ErrNotHeld):
		return &httpError{status: http.StatusNotFound, code: "not-held", title: "not held", detail: "this owner does not hold the key (released, or its lease expired)"}
	case errors.Is(err, driver.ErrUpgrade):
		return &httpError{status: http.StatusConflict, code: "upgrade", title: "upgrade refused", detail: "this owner holds the read side: release it before taking the write side"}
	case errors.Is(err, lockx.ErrInvalidArgument):
		return badRequest("%s", strings.TrimPrefix(err.Error(), "lockx: "))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &httpError{status: http.StatusServiceUnavailable, code: "unavailable", title: "cancelled", detail: "request cancelled", retryAfter: time.Second}
	default:
		return &httpError{status: http.StatusServiceUnavailable, code: "unavailable", title: "backend unavailable", detail: strings.TrimPrefix(err.Error(), "lockx: "), retryAfter: time.Second}
	}
}

func unsupported(what string) *httpError {
	return &httpError{status: http.StatusNotImplemented, code: "unsupported", title: "not supported", detail: "the configured backend does not support " + what}
}
