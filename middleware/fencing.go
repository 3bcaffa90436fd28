package middleware

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"unicode"
	"unicode/utf8"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// Fence is the resource and token a request was checked under. Fencing puts
// it in the handler's context (FenceFromContext), so the handler can pass
// the token on to its storage write — pglock.FencedExec, redislock.FencedSet
// — and Transport forwards it to the services the handler calls.
type Fence struct {
	Resource string
	Token    lockx.Token
	// Signature is the token's signature as the request carried it ("" if
	// none), forwarded by Transport.
	Signature string
}

type fenceCtxKey struct{}

// ContextWithFence returns a context carrying f.
func ContextWithFence(ctx context.Context, f Fence) context.Context {
	return context.WithValue(ctx, fenceCtxKey{}, f)
}

// FenceFromContext returns the fence of the checked request ctx belongs to.
func FenceFromContext(ctx context.Context) (Fence, bool) {
	f, ok := ctx.Value(fenceCtxKey{}).(Fence)
	return f, ok
}

// FenceChecker is the request side of fencing: it finds a request's lock key
// and token and checks them with a driver.FenceStore. Fencing and the echomw
// middleware are thin adapters around it; use it directly to fence requests
// in another framework.
type FenceChecker struct {
	store    driver.FenceStore
	methods  map[string]bool
	key      lookup
	token    lookup
	optional bool
	signer   *lockx.TokenSigner // WithTokenVerification
}

// NewFenceChecker returns a checker over store configured by opts
// (WithMethods, WithKeyLookup, WithTokenLookup, Optional). It reports a nil
// store or an invalid lookup as an error.
func NewFenceChecker(store driver.FenceStore, opts ...Option) (*FenceChecker, error) {
	cfg := newConfig(opts)
	return newFenceChecker(store, &cfg)
}

func newFenceChecker(store driver.FenceStore, cfg *config) (*FenceChecker, error) {
	if store == nil {
		return nil, errors.New("lockx/middleware: fencing requires a FenceStore")
	}
	key, err := parseLookup(cfg.keyLookup)
	if err != nil {
		return nil, fmt.Errorf("lockx/middleware: key %w", err)
	}
	token, err := parseLookup(cfg.tokenLookup)
	if err != nil {
		return nil, fmt.Errorf("lockx/middleware: token %w", err)
	}
	fc := &FenceChecker{store: store, methods: methodSet(cfg.methods), key: key, token: token, optional: cfg.optional}
	if cfg.verifyKey != nil {
		if fc.signer, err = lockx.NewTokenSigner(cfg.verifyKey); err != nil {
			return nil, fmt.Errorf("lockx/middleware: token verification: %w", err)
		}
	}
	return fc, nil
}

// Applies reports whether requests with method are checked.
func (fc *FenceChecker) Applies(method string) bool {
	if fc.methods != nil {
		return fc.methods[method]
	}
	return unsafe(method)
}

// Check checks r. param resolves path parameters for "param:" lookups (nil:
// r.PathValue). It returns the fence and true if r passed the check, false
// if r is not subject to it (a safe method, or neither key nor token with
// Optional), and otherwise a *Problem: 409 for a stale token, 428 for a
// missing key or token, 400 for a malformed one and 503 if the store could
// not answer; with WithTokenVerification, 428 for a token without a
// signature and 403 for one whose signature does not match.
func (fc *FenceChecker) Check(r *http.Request, param func(string) string) (Fence, bool, error) {
	if !fc.Applies(r.Method) {
		return Fence{}, false, nil
	}
	if param == nil {
		param = r.PathValue
	}
	key, keyFrom, kerr := fc.key.extract(r, param)
	raw, tokFrom, terr := fc.token.extract(r, param)
	if kerr != nil || terr != nil {
		from, err := keyFrom, kerr
		if kerr == nil {
			from, err = tokFrom, terr
		}
		return Fence{}, false, newProblem(problemMalformed, http.StatusBadRequest, "Malformed fencing headers", from+": "+err.Error(), err)
	}
	if keyFrom == "" || tokFrom == "" {
		if fc.optional && keyFrom == "" && tokFrom == "" {
			return Fence{}, false, nil
		}
		missing := fc.key
		if keyFrom != "" {
			missing = fc.token
		}
		return Fence{}, false, newProblem(problemMissing, http.StatusPreconditionRequired, "Fencing token required",
			"this write must carry the lock key and fencing token; missing "+missing.String(), nil)
	}
	if err := checkKey(key); err != nil {
		return Fence{}, false, newProblem(problemLockKey, http.StatusBadRequest, "Malformed lock key", keyFrom+": "+trimLockx(err.Error()), err)
	}
	token, err := lockx.ParseToken(raw)
	if err != nil {
		return Fence{}, false, newProblem(problemMalformed, http.StatusBadRequest, "Malformed fencing headers", tokFrom+": "+trimLockx(err.Error()), err)
	}
	sig := r.Header.Get(HeaderTokenSignature)
	if fc.signer != nil {
		if err := fc.signer.Verify(key, token, sig); err != nil {
			return Fence{}, false, signatureProblem(key, token, err)
		}
	}
	if err := fc.store.Fence(r.Context(), key, token); err != nil {
		return Fence{}, false, storeProblem(key, token, err)
	}
	return Fence{Resource: key, Token: token, Signature: sig}, true, nil
}

// checkKey keeps out keys no store could hold faithfully (PostgreSQL text
// refuses NUL and invalid UTF-8) and control characters that have no place
// in a name.
func checkKey(key string) error {
	if err := driver.CheckFenceArgs(key, 1); err != nil {
		return err
	}
	if !utf8.ValidString(key) {
		return &lockx.ArgError{Arg: "lock key", Reason: "not valid UTF-8"}
	}
	for _, r := range key {
		if unicode.IsControl(r) {
			return &lockx.ArgError{Arg: "lock key", Reason: "contains a control character"}
		}
	}
	return nil
}

// Fencing returns middleware that checks the fencing token of every write
// request with store before the handler runs (see FenceChecker.Check for the
// answers), and gives the handler the accepted Fence in its context. It
// panics on a nil store or an invalid lookup, at setup, like a bad route
// pattern.
//
// The check and the handler's write are two steps: if the service runs more
// than one replica, or its handler writes to storage shared with other
// writers, pass the token on to the write itself (pglock.FencedExec,
// redislock.FencedSet) so that the fence and the write are one atomic step.
func Fencing(store driver.FenceStore, opts ...Option) func(http.Handler) http.Handler {
	cfg := newConfig(opts)
	fc, err := newFenceChecker(store, &cfg)
	if err != nil {
		panic(err)
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if cfg.skipper != nil && cfg.skipper(r) {
				next.ServeHTTP(w, r)
				return
			}
			f, ok, err := fc.Check(r, nil)
			if err != nil {
				cfg.errorHandler(w, r, err)
				return
			}
			if ok {
				r = r.WithContext(ContextWithFence(r.Context(), f))
			}
			next.ServeHTTP(w, r)
		})
	}
}
