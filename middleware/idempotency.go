package middleware

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/patterns/idempotency"
)

// HeaderIdempotencyKey is the request header of the IETF draft "The
// Idempotency-Key HTTP Header Field"; HeaderIdempotentReplayed marks a
// replayed response (a common extension; the draft defines none).
const (
	HeaderIdempotencyKey     = "Idempotency-Key"
	HeaderIdempotentReplayed = "Idempotent-Replayed"
)

// Defaults of IdempotencyConfig. The key limits follow Stripe (255
// characters) and the draft's advice to refuse low-entropy keys.
const (
	DefaultMaxKeyLength     = 255
	DefaultMinKeyLength     = 8
	DefaultMinKeyEntropy    = 32 // bits, Shannon estimate
	DefaultKeyChars         = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.:~+/="
	DefaultMaxBodyBytes     = 1 << 20
	DefaultMaxResponseBytes = 1 << 20
)

// IdempotencyProblemBase starts the Type of every problem the idempotency
// middleware answers with: the section of the guide that explains it.
const IdempotencyProblemBase = "https://github.com/lockx-go/lockx/blob/main/docs/patterns/idempotency.md#"

// IdempotencyConfig configures the Idempotency middleware. Only Guard is
// required; zero fields take the defaults documented on them.
type IdempotencyConfig struct {
	// Skipper lets requests bypass the middleware.
	Skipper Skipper
	// Guard runs each request at most once per key and keeps its response
	// (an *idempotency.Guard). Required.
	Guard lockx.Idempotency
	// Methods are the methods the header applies to. Default POST and
	// PATCH, the methods that are not idempotent by definition.
	Methods []string
	// Optional lets requests without the header through unprotected
	// instead of answering 400.
	Optional bool
	// AcceptUnquoted also accepts a bare key (Idempotency-Key: abc), which
	// many clients send, besides the draft's sf-string ("abc").
	AcceptUnquoted bool
	// MinKeyLength, MaxKeyLength and MinKeyEntropy bound the key: length in
	// bytes (default 8 and 255) and Shannon-estimated entropy in bits
	// (default 32, which refuses "aaaaaaaa" and "12345678"); a negative
	// value turns a lower bound off. KeyChars are the characters allowed
	// (default letters, digits and "-_.:~+/=", enough for UUIDs, ULIDs and
	// base64).
	MinKeyLength  int
	MaxKeyLength  int
	MinKeyEntropy float64
	KeyChars      string
	// Principal names the caller a record belongs to (user, tenant, API
	// key); records are kept per principal, so one caller can never replay
	// another's response. An error answers 401. Default
	// AuthorizationPrincipal.
	Principal func(r *http.Request) (string, error)
	// Fingerprint identifies the request the key was first used for; a key
	// reused with a different fingerprint answers 422. Default
	// RequestFingerprint (method, path and query, body digest).
	Fingerprint func(r *http.Request, body []byte) []byte
	// MaxBodyBytes bounds the request body read for the fingerprint; a
	// larger body answers 413. Default 1 MiB.
	MaxBodyBytes int64
	// MaxResponseBytes bounds a stored response body. A larger response is
	// passed through to the client unchanged and not stored: the key is
	// then free again and a retry runs the handler again, so set it above
	// the largest response of a non-idempotent route. Default 1 MiB.
	MaxResponseBytes int
	// ReplayHeaders are the response headers stored and replayed. Default
	// Content-Type, Content-Language, Content-Location, Location, ETag and
	// Last-Modified. Set-Cookie is never worth replaying.
	ReplayHeaders []string
	// Retryable reports the statuses that are not stored, so that a retry
	// runs the handler again. Default 408, 425, 429, 502, 503 and 504:
	// statuses that say nothing was decided. Others, 500 included, are
	// stored and replayed, as Stripe does.
	Retryable func(status int) bool
	// RetryAfter is sent with 409 (request in flight) and 503 (store
	// unavailable). Default 1 s.
	RetryAfter time.Duration
	// ErrorHandler answers refused requests; err is a *Problem. Default
	// (*Problem).ServeHTTP: application/problem+json.
	ErrorHandler ErrorHandler
}

// Replayer is the Idempotency-Key protocol of the IETF draft, shared by the
// Idempotency middleware and echomw. Use it directly to add the header to
// another framework.
type Replayer struct {
	cfg     IdempotencyConfig
	methods map[string]bool
	chars   [256]bool
	replay  []string // canonical ReplayHeaders
}

// NewReplayer checks cfg and fills its defaults. A missing Guard is an
// error.
func NewReplayer(cfg IdempotencyConfig) (*Replayer, error) {
	if cfg.Guard == nil {
		return nil, errors.New("lockx/middleware: idempotency requires a Guard")
	}
	if cfg.Methods == nil {
		cfg.Methods = []string{http.MethodPost, http.MethodPatch}
	}
	if cfg.MaxKeyLength == 0 {
		cfg.MaxKeyLength = DefaultMaxKeyLength
	}
	if cfg.MinKeyLength == 0 {
		cfg.MinKeyLength = DefaultMinKeyLength
	}
	if cfg.MinKeyEntropy == 0 {
		cfg.MinKeyEntropy = DefaultMinKeyEntropy
	}
	if cfg.KeyChars == "" {
		cfg.KeyChars = DefaultKeyChars
	}
	if cfg.Principal == nil {
		cfg.Principal = AuthorizationPrincipal
	}
	if cfg.Fingerprint == nil {
		cfg.Fingerprint = RequestFingerprint
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxResponseBytes == 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if cfg.ReplayHeaders == nil {
		cfg.ReplayHeaders = []string{"Content-Type", "Content-Language", "Content-Location", "Location", "ETag", "Last-Modified"}
	}
	if cfg.Retryable == nil {
		cfg.Retryable = transientStatus
	}
	if cfg.RetryAfter == 0 {
		cfg.RetryAfter = time.Second
	}
	if cfg.ErrorHandler == nil {
		cfg.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) { err.(*Problem).ServeHTTP(w, r) }
	}
	if cfg.MaxKeyLength < 1 || cfg.MaxBodyBytes < 0 || cfg.MaxResponseBytes < 0 || cfg.RetryAfter < 0 {
		return nil, errors.New("lockx/middleware: idempotency: negative or zero limit")
	}
	rp := &Replayer{cfg: cfg, methods: map[string]bool{}}
	for _, m := range cfg.Methods {
		rp.methods[strings.ToUpper(m)] = true
	}
	for i := 0; i < len(cfg.KeyChars); i++ {
		rp.chars[cfg.KeyChars[i]] = true
	}
	for _, h := range cfg.ReplayHeaders {
		rp.replay = append(rp.replay, http.CanonicalHeaderKey(h))
	}
	return rp, nil
}

// Idempotency returns middleware implementing the Idempotency-Key header
// (see Replayer.Serve for the answers). It panics on a config without
// Guard, at setup, like a bad route pattern.
func Idempotency(cfg IdempotencyConfig) func(http.Handler) http.Handler {
	rp, err := NewReplayer(cfg)
	if err != nil {
		panic(err)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if rp.cfg.Skipper != nil && rp.cfg.Skipper(r) {
				next.ServeHTTP(w, r)
				return
			}
			if err := rp.Serve(w, r, next.ServeHTTP); err != nil {
				rp.cfg.ErrorHandler(w, r, err)
			}
		})
	}
}

// Serve runs next for r at most once per (principal, key) and answers
// retries from the stored response. It returns a *Problem, without writing
// anything, when it refuses the request:
//
//   - 400 idempotency-key-missing: the method needs a key and has none;
//   - 400 idempotency-key-invalid: not an sf-string, several keys, too
//     short or long, a character outside KeyChars, too little entropy;
//   - 401 principal-unknown: Principal failed;
//   - 413 request-too-large: the body is over MaxBodyBytes;
//   - 422 idempotency-key-reused: the key was used for another request;
//   - 409 operation-in-progress, with Retry-After: the first request with
//     the key is still being processed;
//   - 503 idempotency-store-unavailable, with Retry-After.
//
// Otherwise it runs next (writing through to w) or writes the stored
// response with Idempotent-Replayed: true, and returns nil. Requests with
// other methods go straight to next.
func (rp *Replayer) Serve(w http.ResponseWriter, r *http.Request, next http.HandlerFunc) error {
	if !rp.methods[r.Method] {
		next(w, r)
		return nil
	}
	vals := r.Header.Values(HeaderIdempotencyKey)
	if len(vals) == 0 {
		if rp.cfg.Optional {
			next(w, r)
			return nil
		}
		return idemProblem("idempotency-key-missing", http.StatusBadRequest, "Idempotency-Key header required",
			"this operation requires an Idempotency-Key header, e.g. Idempotency-Key: \"8e03978e-40d5-43e8-bc93-6894a57f9324\"", nil)
	}
	if len(vals) > 1 {
		return invalidKey(errors.New("more than one Idempotency-Key header"))
	}
	key, err := rp.ParseKey(vals[0])
	if err != nil {
		return invalidKey(err)
	}
	principal, err := rp.cfg.Principal(r)
	if err != nil {
		return idemProblem("principal-unknown", http.StatusUnauthorized, "Caller not identified",
			"idempotency records are kept per caller, and this caller could not be identified", err)
	}
	body, err := readBody(r, rp.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	fp := rp.cfg.Fingerprint(r, body)

	var tee *teeWriter
	v, replayed, err := rp.cfg.Guard.Run(r.Context(), idempotency.Scope(principal, key), fp, func(ctx context.Context) ([]byte, error) {
		tee = &teeWriter{w: w, limit: rp.cfg.MaxResponseBytes, keep: rp.replay}
		next(tee, r.WithContext(ctx))
		tee.finish()
		switch {
		case r.Context().Err() != nil: // the client left: the response may be the handler's reaction to it
			return nil, idempotency.Retry(context.Cause(r.Context()))
		case tee.over:
			return nil, idempotency.Retry(errResponseTooLarge)
		case rp.cfg.Retryable(tee.status):
			return nil, idempotency.Retry(fmt.Errorf("status %d is retryable", tee.status))
		}
		return tee.encode(), nil
	})
	switch {
	case tee != nil:
		// The handler ran and answered the client itself. An error here
		// (not stored: retryable, or the store failed) cannot change that.
		return nil
	case err == nil && replayed:
		if werr := writeReplay(w, r, v); werr != nil {
			return idemProblem("idempotency-store-unavailable", http.StatusServiceUnavailable, "Stored response unreadable", "", werr)
		}
		return nil
	case errors.Is(err, lockx.ErrInProgress):
		p := idemProblem("operation-in-progress", http.StatusConflict, "Request in progress",
			"a request with this Idempotency-Key is still being processed; retry after it completes", err)
		p.RetryAfter = rp.cfg.RetryAfter
		return p
	case errors.Is(err, lockx.ErrKeyReused):
		return idemProblem("idempotency-key-reused", http.StatusUnprocessableEntity, "Idempotency-Key reused",
			"this Idempotency-Key was used for a different request; use a new key for a new request", err)
	case errors.Is(err, lockx.ErrInvalidArgument):
		return invalidKey(err)
	case err == nil:
		return idemProblem("idempotency-store-unavailable", http.StatusServiceUnavailable, "No response stored", "", errors.New("guard returned nothing"))
	default:
		p := idemProblem("idempotency-store-unavailable", http.StatusServiceUnavailable, "Idempotency store unavailable",
			"the request was not processed; retry later", err)
		p.RetryAfter = rp.cfg.RetryAfter
		return p
	}
}

var errResponseTooLarge = errors.New("response larger than MaxResponseBytes: not stored")

func idemProblem(kind string, status int, title, detail string, err error) *Problem {
	return &Problem{Type: IdempotencyProblemBase + kind, Title: title, Status: status, Detail: detail, Err: err}
}

func invalidKey(err error) *Problem {
	return idemProblem("idempotency-key-invalid", http.StatusBadRequest, "Invalid Idempotency-Key", trimLockx(err.Error()), err)
}

// transientStatus is the default Retryable.
func transientStatus(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// ParseKey parses an Idempotency-Key header value, an RFC 8941 sf-string
// (or, with AcceptUnquoted, a bare key), and checks it against the
// configured limits. Parameters after the string are refused: the draft
// defines none.
func (rp *Replayer) ParseKey(v string) (string, error) {
	v = strings.Trim(v, " \t")
	var key string
	if strings.HasPrefix(v, `"`) {
		var b strings.Builder
		i := 1
		for ; i < len(v); i++ {
			c := v[i]
			if c == '\\' {
				i++
				if i == len(v) || (v[i] != '"' && v[i] != '\\') {
					return "", errors.New("bad escape in sf-string")
				}
				b.WriteByte(v[i])
				continue
			}
			if c == '"' {
				break
			}
			if c < 0x20 || c > 0x7e {
				return "", errors.New("character outside printable ASCII in sf-string")
			}
			b.WriteByte(c)
		}
		if i >= len(v) {
			return "", errors.New("unterminated sf-string")
		}
		if i != len(v)-1 {
			return "", errors.New("unexpected text after the sf-string")
		}
		key = b.String()
	} else if rp.cfg.AcceptUnquoted {
		key = v
	} else {
		return "", errors.New(`not an sf-string: quote the key, e.g. "8e03978e-40d5-43e8-bc93-6894a57f9324"`)
	}
	return key, rp.checkKey(key)
}

func (rp *Replayer) checkKey(key string) error {
	switch {
	case len(key) == 0:
		return errors.New("empty key")
	case len(key) > rp.cfg.MaxKeyLength:
		return fmt.Errorf("key of %d bytes, longer than %d", len(key), rp.cfg.MaxKeyLength)
	case rp.cfg.MinKeyLength > 0 && len(key) < rp.cfg.MinKeyLength:
		return fmt.Errorf("key of %d bytes, shorter than %d", len(key), rp.cfg.MinKeyLength)
	}
	for i := 0; i < len(key); i++ {
		if !rp.chars[key[i]] {
			return fmt.Errorf("character %q not allowed in a key", key[i])
		}
	}
	if rp.cfg.MinKeyEntropy > 0 {
		if e := entropyBits(key); e < rp.cfg.MinKeyEntropy {
			return fmt.Errorf("key too predictable (about %.0f bits, want %.0f): use a random value such as a UUID", e, rp.cfg.MinKeyEntropy)
		}
	}
	return nil
}

// entropyBits estimates a key's entropy as its length times the Shannon
// entropy of its character frequencies: low for repeated or patterned keys,
// a lower bound in practice for random ones.
func entropyBits(s string) float64 {
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	n := float64(len(s))
	h := 0.0
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h * n
}

// AuthorizationPrincipal is the default principal: a digest of the
// Authorization header, so that every credential has its own records
// without the credential being stored. Requests without one share the
// anonymous principal "". Services that authenticate otherwise (sessions,
// mTLS, a gateway header) should pass their own Principal.
func AuthorizationPrincipal(r *http.Request) (string, error) {
	a := r.Header.Get("Authorization")
	if a == "" {
		return "", nil
	}
	sum := sha256.Sum256([]byte(a))
	return "auth:" + hex.EncodeToString(sum[:16]), nil
}

// RequestFingerprint is the default fingerprint: SHA-256 over the method,
// the path and query, and the body.
func RequestFingerprint(r *http.Request, body []byte) []byte {
	h := sha256.New()
	io.WriteString(h, r.Method)
	h.Write([]byte{0})
	io.WriteString(h, r.URL.EscapedPath())
	h.Write([]byte{'?'})
	io.WriteString(h, r.URL.RawQuery)
	h.Write([]byte{0})
	h.Write(body)
	return h.Sum(nil)
}

// readBody reads the request body whole (for the fingerprint) and puts it
// back for the handler.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if r.ContentLength > limit {
		return nil, tooLarge(limit, nil)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	_ = r.Body.Close()
	if err != nil {
		return nil, idemProblem("request-unreadable", http.StatusBadRequest, "Request body unreadable", "", err)
	}
	if int64(len(body)) > limit {
		return nil, tooLarge(limit, nil)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
}

func tooLarge(limit int64, err error) *Problem {
	return idemProblem("request-too-large", http.StatusRequestEntityTooLarge, "Request body too large",
		fmt.Sprintf("requests with an Idempotency-Key may carry at most %d bytes", limit), err)
}

// teeWriter passes a response through to the client and keeps a copy of
// its status, selected headers and body (up to limit) for the store.
type teeWriter struct {
	w      http.ResponseWriter
	limit  int
	keep   []string
	status int
	hdr    []string // name, value pairs kept at WriteHeader
	body   []byte
	over   bool
}

func (t *teeWriter) Header() http.Header { return t.w.Header() }

func (t *teeWriter) WriteHeader(code int) {
	if t.status != 0 {
		return
	}
	if code >= 100 && code < 200 { // informational: passed on, not the answer
		t.w.WriteHeader(code)
		return
	}
	t.status = code
	h := t.w.Header()
	for _, name := range t.keep {
		for _, v := range h[name] {
			t.hdr = append(t.hdr, name, v)
		}
	}
	t.w.WriteHeader(code)
}

func (t *teeWriter) Write(p []byte) (int, error) {
	if t.status == 0 {
		t.WriteHeader(http.StatusOK)
	}
	if !t.over {
		if len(t.body)+len(p) > t.limit {
			t.over, t.body = true, nil
		} else {
			t.body = append(t.body, p...)
		}
	}
	return t.w.Write(p)
}

// Flush passes a flush on, for streaming handlers.
func (t *teeWriter) Flush() {
	if t.status == 0 {
		t.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(t.w).Flush()
}

// Unwrap lets http.ResponseController reach the client's writer.
func (t *teeWriter) Unwrap() http.ResponseWriter { return t.w }

// finish records the implicit 200 of a handler that wrote nothing.
func (t *teeWriter) finish() {
	if t.status == 0 {
		t.WriteHeader(http.StatusOK)
	}
}

// encode packs the kept response: a version byte, the status, the header
// pairs and the body, lengths as uvarints. It is read on every replay, so it
// is cheaper than JSON.
func (t *teeWriter) encode() []byte {
	n := 1 + 3*binary.MaxVarintLen32 + len(t.body)
	for _, s := range t.hdr {
		n += binary.MaxVarintLen32 + len(s)
	}
	b := make([]byte, 0, n)
	b = append(b, 1)
	b = binary.AppendUvarint(b, uint64(t.status))
	b = binary.AppendUvarint(b, uint64(len(t.hdr)/2))
	for _, s := range t.hdr {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return append(b, t.body...)
}

var errCorrupt = errors.New("lockx/middleware: corrupt stored response")

// writeReplay writes a stored response with Idempotent-Replayed: true.
func writeReplay(w http.ResponseWriter, r *http.Request, b []byte) error {
	if len(b) < 1 || b[0] != 1 {
		return errCorrupt
	}
	b = b[1:]
	status, n := binary.Uvarint(b)
	if n <= 0 || status < 200 || status > 999 {
		return errCorrupt
	}
	b = b[n:]
	pairs, n := binary.Uvarint(b)
	if n <= 0 || pairs > uint64(len(b)) {
		return errCorrupt
	}
	b = b[n:]
	h := w.Header()
	for range pairs {
		var kv [2]string
		for j := range kv {
			l, n := binary.Uvarint(b)
			if n <= 0 || l > uint64(len(b)-n) {
				return errCorrupt
			}
			kv[j] = string(b[n : n+int(l)])
			b = b[n+int(l):]
		}
		h[kv[0]] = append(h[kv[0]], kv[1])
	}
	h.Set(HeaderIdempotentReplayed, "true")
	w.WriteHeader(int(status))
	if r.Method != http.MethodHead {
		_, _ = w.Write(b)
	}
	return nil
}
