package lockxd

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/lockx-go/lockx/internal/lockxd/wire"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// watchPing is how often an idle watch stream carries a comment, so that
// proxies and the client see a live connection.
const watchPing = 15 * time.Second

// watch serves GET /v1/watch?key=K&owner=O as server-sent events: the
// wake-up channel of the Go client (lockx/httplock), which waits as the core
// Client waits on any Notifier backend.
//
// The server first registers with the backend's Notifier (Watch on the
// tenant's key), then sends "event: ready"; a client that attempts the key
// only after reading it misses no release. When the key may be free the
// server sends "event: wake" and ends the stream. A stream also ends —
// "event: timeout" — after the server's max wait, or without an event when
// the server shuts down; either way the client attempts again. The ready
// event's data carries the stream's id: a client done waiting early posts
// it to /v1/watch/cancel and the stream ends cleanly, so the connection
// stays open for its next request instead of being cut. owner lets a
// fair release wake only the head of the queue. Keys of every kind (lock,
// rwlock, semaphore) share the tenant's namespace, so one stream serves
// waiters of all of them.
func (s *Server) watch(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	status := http.StatusOK
	t, herr := s.admit(r, start)
	defer func() { s.metrics.observe(t.nameOrEmpty(), "watch", "watch", status, time.Since(start)) }()
	fail := func(e *httpError) {
		status = e.status
		writeProblem(w, e)
	}
	if herr != nil {
		fail(herr)
		return
	}
	q := r.URL.Query()
	key, owner := q.Get("key"), q.Get("owner")
	if err := checkKey("key", key, maxKeyLen); err != nil {
		fail(badRequest("%v", err))
		return
	}
	if err := checkKey("owner", owner, maxOwnerLen); err != nil {
		fail(badRequest("%v", err))
		return
	}
	var n driver.Notifier
	ok := driver.As(s.b, &n)
	if !ok {
		fail(unsupported("wake-up notifications (poll with try-acquire)"))
		return
	}
	if !t.startWait() {
		fail(&httpError{status: http.StatusTooManyRequests, code: "quota", title: "quota exceeded", detail: fmt.Sprintf("tenant %s has its maximum of %d waiters", t.name, t.cfg.MaxWaiters), retryAfter: time.Second})
		return
	}
	defer t.endWait()
	rc := http.NewResponseController(w)
	wake, cancel, err := n.Watch(r.Context(), t.bkey(key), holder(t, owner))
	if err != nil {
		fail(backendError(err))
		return
	}
	defer cancel()
	id, end := s.streams.add(t)
	defer s.streams.remove(id)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(event, data string) bool {
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, data); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send("ready", `{"id":"`+id+`"}`) {
		return
	}
	deadline := time.NewTimer(s.cfg.MaxWait)
	defer deadline.Stop()
	ping := time.NewTicker(watchPing)
	defer ping.Stop()
	for {
		select {
		case <-wake:
			send("wake", "{}")
			return
		case <-deadline.C:
			send("timeout", "{}")
			return
		case <-end:
			return // cancelled by the client: end cleanly, keep the connection
		case <-ping.C:
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		case <-s.closing:
			return
		case <-r.Context().Done():
			return
		}
	}
}

// streams are the open watch streams by id, so that their clients can end
// them without closing the connection.
type streams struct {
	mu sync.Mutex
	m  map[string]stream
}

type stream struct {
	t   *tenant
	end chan struct{}
}

func (ss *streams) add(t *tenant) (string, <-chan struct{}) {
	id := string(lockx.NewOwner()) // 128 random bits
	end := make(chan struct{})
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.m == nil {
		ss.m = map[string]stream{}
	}
	ss.m[id] = stream{t: t, end: end}
	return id, end
}

func (ss *streams) remove(id string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.m, id)
}

// end ends t's stream id, if it is open.
func (ss *streams) end(t *tenant, id string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if st, ok := ss.m[id]; ok && st.t == t {
		close(st.end)
		delete(ss.m, id)
	}
}

// watchCancel serves POST /v1/watch/cancel: it ends the caller's watch
// stream id (a no-op if it has ended or is not the tenant's). It is not
// charged to the rate limit: it only frees what a charged watch took.
func (s *Server) watchCancel(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	status := http.StatusOK
	t, herr := s.authenticate(r)
	defer func() { s.metrics.observe(t.nameOrEmpty(), "watch", "cancel", status, time.Since(start)) }()
	if herr == nil {
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		var req wire.WatchCancel
		if herr = parseBody(r, maxBody, &req); herr == nil {
			s.streams.end(t, req.ID)
			writeJSON(w, req)
			return
		}
	}
	status = herr.status
	writeProblem(w, herr)
}
