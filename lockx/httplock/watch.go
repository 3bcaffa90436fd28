package httplock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/lockx-go/lockx/lockx"
)

// Watch implements lockx.Notifier with lockxd's server-sent events
// (GET /v1/watch). It returns once the server has registered the watch
// with its backend (the stream's "ready" event), so an attempt made after
// it misses no release; the channel receives when the server sends "wake",
// or when the stream ends for any other reason (the server's max wait, a
// restart, a broken connection) — the Client then simply attempts again.
//
// A watch on a key serves waiters of every kind (lock, read/write lock,
// semaphore): lockxd keeps all kinds of one key under one name.
func (b *Backend) Watch(ctx context.Context, key string, owner lockx.Owner) (<-chan struct{}, func(), error) {
	if b.err != nil {
		return nil, nil, b.err
	}
	if b.noWatch.Load() {
		return nil, nil, errNoWatch
	}
	// The stream outlives ctx, which only bounds its set-up (the Client
	// cancels it as soon as Watch returns); it ends with cancel or Close.
	sctx, stop := context.WithCancel(b.ctx)
	q := url.Values{"key": {key}, "owner": {string(owner)}}
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, b.base+"/v1/watch?"+q.Encode(), nil)
	if err != nil {
		stop()
		return nil, nil, lockx.Unavailable("watch", err)
	}
	req.Header.Set("Authorization", b.auth)
	req.Header.Set("Accept", "text/event-stream")
	undo := context.AfterFunc(ctx, stop)
	res, err := b.hc.Do(req)
	if err != nil {
		undo()
		stop()
		return nil, nil, lockx.Unavailable("watch", err)
	}
	if res.StatusCode != http.StatusOK {
		if res.StatusCode == http.StatusNotImplemented {
			// The server's backend cannot notify: the Client's backoff
			// is all there is, so stop asking.
			b.noWatch.Store(true)
		}
		p := readProblem(res)
		res.Body.Close()
		undo()
		stop()
		return nil, nil, b.verdict("watch", res, p)
	}
	events := bufio.NewReader(res.Body)
	ev, err := nextEvent(events)
	if !undo() || err != nil || ev != "ready" {
		res.Body.Close()
		stop()
		if err == nil {
			err = fmt.Errorf("lockxd: watch: first event %q, want ready", ev)
		}
		if ctx.Err() != nil {
			err = errors.Join(err, context.Cause(ctx))
		}
		return nil, nil, lockx.Unavailable("watch", err)
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		res.Body.Close()
		stop()
		return nil, nil, lockx.Unavailable("watch", errors.New("httplock: backend closed"))
	}
	b.wg.Add(1)
	b.mu.Unlock()
	wake := make(chan struct{}, 1)
	done := make(chan struct{})
	var ended atomic.Bool
	go func() {
		defer b.wg.Done()
		defer close(done)
		defer res.Body.Close()
		// Any end of the stream is a reason to look again: a wake-up, the
		// server's timeout, or a broken connection.
		_, _ = nextEvent(events)
		ended.Store(true)
		wake <- struct{}{}
		_, _ = io.Copy(io.Discard, events) // reuse the connection after a clean end
	}()
	cancel := func() {
		// After its last event the server ends the stream at once: let the
		// reader finish it so the connection goes back to the pool, rather
		// than cut it (and open a new one for the next watch).
		if ended.Load() {
			t := time.NewTimer(100 * time.Millisecond)
			defer t.Stop()
			select {
			case <-done:
				stop()
				return
			case <-t.C:
			}
		}
		stop()
		<-done
	}
	return wake, cancel, nil
}

// errNoWatch is Watch's answer once the server has said that its backend
// cannot notify (501).
var errNoWatch = lockx.Unavailable("watch", errors.New("lockxd: the server's backend sends no wake-ups"))

// nextEvent reads one server-sent event and returns its name ("message"
// when unnamed). Comments (": ping") are skipped.
func nextEvent(r *bufio.Reader) (string, error) {
	name := ""
	seen := false
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return "", err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if seen {
				if name == "" {
					name = "message"
				}
				return name, nil
			}
		case strings.HasPrefix(line, ":"):
		default:
			seen = true
			if v, ok := strings.CutPrefix(line, "event:"); ok {
				name = strings.TrimSpace(v)
			}
		}
	}
}
