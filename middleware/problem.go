package middleware

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/lockx-go/lockx/lockx"
)

// ProblemBase is the URI the Type of every Problem starts with: the section
// of the fencing guide that explains it.
const ProblemBase = "https://github.com/lockx-go/lockx/blob/main/docs/fencing.md#"

// Problem is the error the middleware of this package (and of echomw)
// reports, and the RFC 9457 problem detail it answers with. It wraps the
// cause, so errors.Is(err, lockx.ErrStaleToken) and errors.As to
// *lockx.StaleTokenError keep working in an ErrorHandler.
type Problem struct {
	Type     string      `json:"type"`
	Title    string      `json:"title"`
	Status   int         `json:"status"`
	Detail   string      `json:"detail,omitempty"`
	Resource string      `json:"resource,omitempty"`
	Token    lockx.Token `json:"token,omitempty"` // the token presented
	Seen     lockx.Token `json:"seen,omitempty"`  // the newer token already accepted

	// RetryAfter, if positive, is sent as the Retry-After header.
	RetryAfter time.Duration `json:"-"`
	// Err is the cause.
	Err error `json:"-"`
}

// Error implements error.
func (p *Problem) Error() string {
	msg := "lockx/middleware: " + strconv.Itoa(p.Status) + " " + p.Title
	if p.Detail != "" {
		msg += ": " + p.Detail
	}
	return msg
}

// Unwrap returns the cause.
func (p *Problem) Unwrap() error { return p.Err }

// MarshalJSON writes the problem detail. Implementing json.Marshaler also
// makes Echo's default error handler send the body unchanged.
func (p *Problem) MarshalJSON() ([]byte, error) {
	type plain Problem
	return json.Marshal((*plain)(p))
}

// ServeHTTP writes the problem as an application/problem+json response with
// Retry-After when set. Problem responses are never cached.
func (p *Problem) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/problem+json")
	p.SetHeaders(w.Header())
	w.WriteHeader(p.Status)
	if r.Method != http.MethodHead {
		_ = json.NewEncoder(w).Encode(p)
	}
}

// SetHeaders sets the response headers that go with the problem, for
// frameworks that write the body themselves: Cache-Control: no-store, and
// Retry-After in whole seconds (rounded up) when RetryAfter is set.
func (p *Problem) SetHeaders(h http.Header) {
	h.Set("Cache-Control", "no-store")
	if p.RetryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(int64((p.RetryAfter+time.Second-1)/time.Second), 10))
	}
}

// Problem types, each the anchor of its section in docs/fencing.md.
const (
	problemStale       = "stale-fencing-token"
	problemMissing     = "fencing-token-required"
	problemMalformed   = "malformed-fencing-header"
	problemUnavailable = "fence-store-unavailable"
	problemBusy        = "resource-locked"
	problemLockKey     = "malformed-lock-key"
	problemUnsigned    = "signed-fencing-token-required"
	problemForged      = "forged-fencing-token"
)

// signatureProblem answers a token whose signature was refused: missing
// (428, the client must send it) or not the lock side's (403: no retry
// helps).
func signatureProblem(resource string, token lockx.Token, err error) *Problem {
	var se *lockx.SignatureError
	var p *Problem
	if errors.As(err, &se) && se.Reason == "missing" {
		p = newProblem(problemUnsigned, http.StatusPreconditionRequired, "Signed fencing token required",
			"this resource accepts only tokens signed by the lock service; send the signature in "+HeaderTokenSignature, err)
	} else {
		p = newProblem(problemForged, http.StatusForbidden, "Fencing token not issued by the lock service",
			"the signature does not match this lock key and token; the token was not issued by the lock service (or was altered)", err)
	}
	p.Resource, p.Token = resource, token
	return p
}

func newProblem(kind string, status int, title, detail string, err error) *Problem {
	return &Problem{Type: ProblemBase + kind, Title: title, Status: status, Detail: detail, Err: err}
}

// storeProblem maps a FenceStore's error to a response: a stale token is the
// client's conflict, a bad argument its mistake, anything else the server's
// failure to check, which must not let the write through.
func storeProblem(resource string, token lockx.Token, err error) *Problem {
	var stale *lockx.StaleTokenError
	switch {
	case errors.As(err, &stale):
		p := newProblem(problemStale, http.StatusConflict, "Stale fencing token",
			"a write with token "+stale.Seen.String()+" has already been accepted for this resource; this lock was lost", err)
		p.Resource, p.Token, p.Seen = resource, token, stale.Seen
		return p
	case errors.Is(err, lockx.ErrInvalidArgument):
		p := newProblem(problemMalformed, http.StatusBadRequest, "Malformed fencing headers", trimLockx(err.Error()), err)
		p.Resource, p.Token = resource, token
		return p
	default:
		p := newProblem(problemUnavailable, http.StatusServiceUnavailable, "Fencing token could not be checked", "", err)
		p.Resource, p.Token, p.RetryAfter = resource, token, time.Second
		return p
	}
}

func trimLockx(s string) string {
	const p = "lockx: "
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}
