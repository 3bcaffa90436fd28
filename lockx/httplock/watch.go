package httplock

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockx-go/lockx/internal/lockxd/wire"
	"github.com/lockx-go/lockx/lockx/driver"
)

// Watch implements driver.Notifier with lockxd's server-sent events
// (GET /v1/watch). It returns once the server has registered the watch
// with its backend (the stream's "ready" event), so an attempt made after
// it misses no release; the channel receives when the server sends "wake",
// or when the stream ends for any other reason (the server's max wait, a
// restart, a broken connection) — the Client then simply attempts again.
//
// A watch on a key serves waiters of every kind (lock, read/write lock,
// semaphore): lockxd keeps all kinds of one key under one name.
func (b *Backend) Watch(ctx context.Context, key string, owner driver.Owner) (<-chan struct{}, func(), error) {
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
		return nil, nil, driver.Unavailable("watch", err)
	}
	req.Header.Set("Authorization", b.auth)
	req.Header.Set("Accept", "text/event-stream")
	undo := context.AfterFunc(ctx, stop)
	res, err := b.hc.Do(req)
	if err != nil {
		undo()
		stop()
		return nil, nil, driver.Unavailable("watch", err)
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
	ev, data, err := nextEvent(events)
	if !undo() || err != nil || ev != "ready" {
		res.Body.Close()
		stop()
		if err == nil {
			err = fmt.Errorf("lockxd: watch: first event %q, want ready", ev)
		}
		if ctx.Err() != nil {
			err = errors.Join(err, context.Cause(ctx))
		}
		return nil, nil, driver.Unavailable("watch", err)
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		res.Body.Close()
		stop()
		return nil, nil, driver.Unavailable("watch", fmt.Errorf("httplock: backend closed: %w", driver.ErrClosed))
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
		_, _, _ = nextEvent(events)
		ended.Store(true)
		wake <- struct{}{}
		_, _ = io.Copy(io.Discard, events) // reuse the connection after a clean end
	}()
	var ready struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal([]byte(data), &ready)
	var once sync.Once
	cancel := func() { once.Do(func() { b.endWatch(ready.ID, ended.Load(), stop, done) }) }
	return wake, cancel, nil
}

// errNoWatch is Watch's answer once the server has said that its backend
// cannot notify (501).
var errNoWatch = driver.Unavailable("watch", errors.New("lockxd: the server's backend sends no wake-ups"))

// endWatch ends a watch stream whose waiter is done with it. Cutting the
// stream would cost its connection (and the next watch a new one), so a
// stream that has had its last event is left to finish, and an open one
// is ended by the server on request (POST /v1/watch/cancel) — in the
// background, bounded, and cut if that fails.
func (b *Backend) endWatch(id string, ended bool, stop func(), done <-chan struct{}) {
	if ended || id == "" {
		if ended {
			t := time.NewTimer(100 * time.Millisecond)
			defer t.Stop()
			select {
			case <-done:
			case <-t.C:
			}
		}
		stop()
		<-done
		return
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		stop()
		<-done
		return
	}
	b.wg.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.wg.Done()
		defer func() { stop(); <-done }()
		ctx, cancel := context.WithTimeout(b.ctx, time.Second)
		defer cancel()
		if _, _, err := b.call(ctx, "watch", http.MethodPost, "/v1/watch/cancel", wire.WatchCancel{ID: id}, nil); err != nil {
			return
		}
		select {
		case <-done:
		case <-ctx.Done():
		}
	}()
}

// nextEvent reads one server-sent event and returns its name ("message"
// when unnamed) and data. Comments (": ping") are skipped.
func nextEvent(r *bufio.Reader) (name, data string, err error) {
	seen := false
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return "", "", err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if seen {
				if name == "" {
					name = "message"
				}
				return name, data, nil
			}
		case strings.HasPrefix(line, ":"):
		default:
			seen = true
			if v, ok := strings.CutPrefix(line, "event:"); ok {
				name = strings.TrimSpace(v)
			} else if v, ok := strings.CutPrefix(line, "data:"); ok {
				data += strings.TrimPrefix(v, " ")
			}
		}
	}
}
