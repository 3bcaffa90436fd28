package leader

import (
	"context"
	"math"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"time"
)

// ForwardedHeader marks a request Middleware forwarded to the leader. An
// instance that receives a forwarded request and does not lead answers
// 503 instead of forwarding it again, so two instances that each think the
// other leads cannot bounce a request between them.
const ForwardedHeader = "X-Lockx-Leader-Forwarded"

// LeaderHeader names, on a 503, the leader the instance knew of.
const LeaderHeader = "X-Lockx-Leader"

// HTTPOption configures Middleware.
type HTTPOption func(*httpConfig)

type httpConfig struct {
	retryAfter time.Duration
	leaderURL  func(identity string) (*url.URL, bool)
}

// WithRetryAfter sets the Retry-After of a 503 (whole seconds, rounded
// up; default: the election's lease, the longest a vacancy lasts after a
// leader dies).
func WithRetryAfter(d time.Duration) HTTPOption {
	return func(c *httpConfig) {
		if d > 0 {
			c.retryAfter = d
		}
	}
}

// WithLeaderURL makes a non-leader forward requests to the leader: urlOf
// maps the leader's identity (WithIdentity — for example its advertised
// host:port) to the base URL to forward to, or reports false if it is not
// known. Without it, non-leaders answer 503.
func WithLeaderURL(urlOf func(identity string) (*url.URL, bool)) HTTPOption {
	return func(c *httpConfig) { c.leaderURL = urlOf }
}

type termCtxKey struct{}

// TermFromContext returns the term of the leader serving the request, in a
// handler behind Middleware: fence the handler's writes with its Token.
func TermFromContext(ctx context.Context) (*Term, bool) {
	t, ok := ctx.Value(termCtxKey{}).(*Term)
	return t, ok
}

// Middleware serves "leader-only" endpoints: on the leader it calls next
// with the term in the request's context (TermFromContext) and a context
// cancelled if the term ends; elsewhere it forwards the request to the
// leader (WithLeaderURL) or answers 503 Service Unavailable with
// Retry-After and the known leader's identity in X-Lockx-Leader. The
// candidate c must be running (Candidate.Run).
func Middleware(c *Candidate, opts ...HTTPOption) func(http.Handler) http.Handler {
	cfg := httpConfig{retryAfter: c.Election().Lease()}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	retryAfter := strconv.Itoa(int(math.Ceil(cfg.retryAfter.Seconds())))
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if t, ok := c.Term(); ok {
				ctx, cancel := context.WithCancelCause(context.WithValue(r.Context(), termCtxKey{}, t))
				defer cancel(nil)
				stop := context.AfterFunc(t.Context(), func() { cancel(context.Cause(t.Context())) })
				defer stop()
				next.ServeHTTP(w, r.WithContext(ctx))
				return
			}
			info, err := c.Election().Leader(r.Context())
			if err == nil && cfg.leaderURL != nil && r.Header.Get(ForwardedHeader) == "" {
				if u, ok := cfg.leaderURL(info.Identity); ok {
					forward(w, r, u)
					return
				}
			}
			if err == nil {
				w.Header().Set(LeaderHeader, info.Identity)
			}
			w.Header().Set("Retry-After", retryAfter)
			http.Error(w, "not the leader", http.StatusServiceUnavailable)
		})
	}
}

func forward(w http.ResponseWriter, r *http.Request, to *url.URL) {
	p := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(to)
			pr.SetXForwarded()
			pr.Out.Header.Set(ForwardedHeader, "1")
		},
	}
	p.ServeHTTP(w, r)
}
