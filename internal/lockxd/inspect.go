package lockxd

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lockx-go/lockx/internal/lockxd/wire"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

func (s *Server) inspect(ctx context.Context, t *tenant, r *http.Request) (any, *httpError) {
	var in driver.Inspector
	ok := driver.As(s.b, &in)
	if !ok {
		return nil, unsupported("listing locks")
	}
	q := r.URL.Query()
	pre := ns(t)
	if key := q.Get("key"); key != "" {
		if err := checkKey("key", key, maxKeyLen); err != nil {
			return nil, badRequest("%v", err)
		}
		li, err := in.Lock(ctx, t.bkey(key))
		if err != nil {
			return nil, backendError(err)
		}
		return t.view(li), nil
	}
	prefix := q.Get("prefix")
	if len(prefix) > maxKeyLen || !utf8.ValidString(prefix) {
		return nil, badRequest("bad prefix")
	}
	limit := 1000
	out := []wire.LockView{}
	err := in.Locks(ctx, pre+prefix, func(li lockx.LockInfo) bool {
		if strings.HasPrefix(li.Key, pre) {
			out = append(out, t.view(li))
		}
		return len(out) < limit
	})
	if err != nil {
		return nil, backendError(err)
	}
	return wire.LockList{Locks: out, Truncated: len(out) >= limit}, nil
}

func (t *tenant) view(li lockx.LockInfo) wire.LockView {
	return wire.LockView{Key: t.visible(li.Key), Holder: string(li.Owner), Token: li.Token.String(), TTLMS: li.TTL.Milliseconds(), AgeMS: li.Age.Milliseconds(), Waiters: li.Waiters}
}

func (s *Server) usage(ctx context.Context, t *tenant, r *http.Request) (any, *httpError) {
	var sb driver.SemaphoreBackend
	ok := driver.As(s.b, &sb)
	if !ok {
		return nil, unsupported("semaphores")
	}
	key := r.URL.Query().Get("key")
	if err := checkKey("key", key, maxKeyLen); err != nil {
		return nil, badRequest("%v", err)
	}
	u, err := sb.Permits(ctx, t.bkey(key))
	if err != nil {
		return nil, backendError(err)
	}
	return wire.Usage{InUse: u.InUse, Holders: u.Holders, Waiting: u.Waiting}, nil
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if s.isClosing() {
		writeProblem(w, &httpError{status: http.StatusServiceUnavailable, code: "draining", title: "draining", detail: "server is shutting down"})
		return
	}
	// A probe of the backend: TTL of a key nobody holds answers ErrNotHeld
	// when the backend is reachable.
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	_, err := s.b.TTL(ctx, "lockxd/health", "lockxd-health")
	if err != nil && !errors.Is(err, lockx.ErrNotHeld) {
		writeProblem(w, &httpError{status: http.StatusServiceUnavailable, code: "unavailable", title: "backend unavailable", detail: err.Error()})
		return
	}
	writeJSON(w, map[string]string{"status": "ok"})
}
