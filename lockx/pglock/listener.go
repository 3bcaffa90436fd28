package pglock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// flagLinger keeps a wait flag held for a while after its last waiter left,
// so that a key waited on again and again costs no lock and unlock each time.
const flagLinger = time.Second

// listener owns the Backend's one LISTEN connection. It also holds, in
// shared mode, the wait flag of every key this process waits for: a release
// notifies only if it cannot take the key's flag, so releases nobody waits
// for cost no NOTIFY (which serialises committing transactions server-wide).
type listener struct {
	b *Backend

	mu        sync.Mutex
	flags     map[int64]*flag
	running   bool
	kicked    bool
	interrupt context.CancelFunc // ends the current WaitForNotification
	failed    chan struct{}      // closed (and replaced) when connecting fails
	failErr   error
	up        chan struct{} // closed when listening
	listening bool
	done      chan struct{}
}

type flag struct {
	refs  int
	held  bool
	ready chan struct{} // closed once held
	idle  time.Time     // when refs fell to 0
}

func newListener(b *Backend) *listener {
	return &listener{b: b, flags: make(map[int64]*flag), failed: make(chan struct{}), up: make(chan struct{})}
}

// ensure takes a reference on hash's flag and waits until the flag is held
// on a listening connection.
func (l *listener) ensure(ctx context.Context, hash int64) error {
	l.mu.Lock()
	f := l.flags[hash]
	if f == nil {
		f = &flag{ready: make(chan struct{})}
		l.flags[hash] = f
	}
	f.refs++
	if f.held {
		l.mu.Unlock()
		return nil
	}
	ready, failed := f.ready, l.failed
	l.startLocked()
	l.kickLocked()
	l.mu.Unlock()
	select {
	case <-ready:
		return nil
	case <-failed:
		l.unref(hash)
		l.mu.Lock()
		err := l.failErr
		l.mu.Unlock()
		return err
	case <-ctx.Done():
		l.unref(hash)
		return context.Cause(ctx)
	case <-l.b.g.Done():
		l.unref(hash)
		return errClosed
	}
}

// warm starts the listener and waits until it listens.
func (l *listener) warm(ctx context.Context) error {
	l.mu.Lock()
	if l.listening {
		l.mu.Unlock()
		return nil
	}
	up, failed := l.up, l.failed
	l.startLocked()
	l.mu.Unlock()
	select {
	case <-up:
		return nil
	case <-failed:
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.failErr
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-l.b.g.Done():
		return errClosed
	}
}

func (l *listener) startLocked() {
	if !l.running {
		l.running = true
		l.done = make(chan struct{})
		if !l.b.g.Go(l.run) {
			close(l.done) // closed: nothing to wait for
		}
	}
}

func (l *listener) unref(hash int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f := l.flags[hash]; f != nil {
		f.refs--
		if f.refs == 0 {
			f.idle = time.Now()
			if !f.held {
				delete(l.flags, hash)
			}
		}
	}
}

func (l *listener) kickLocked() {
	if l.interrupt != nil {
		l.interrupt()
		l.interrupt = nil
	} else {
		l.kicked = true
	}
}

// stop is called by Backend.Close after it cancelled b.g.
func (l *listener) stop() {
	l.mu.Lock()
	running := l.running
	l.kickLocked()
	l.mu.Unlock()
	if running {
		<-l.done
	}
}

func (l *listener) run() {
	defer close(l.done)
	var conn *pgxpool.Conn
	defer func() {
		if conn != nil {
			l.closeConn(conn)
		}
	}()
	retry := 50 * time.Millisecond
	for {
		select {
		case <-l.b.g.Done():
			return
		default:
		}
		if conn == nil {
			c, err := l.connect()
			if err != nil {
				l.fail(err)
				select {
				case <-l.b.g.Done():
					return
				case <-time.After(retry):
				}
				retry = min(2*retry, time.Second)
				continue
			}
			conn, retry = c, 50*time.Millisecond
			l.setListening(true)
			l.b.wakeAll() // notifications may have been missed while down
		}
		if err := l.syncFlags(conn); err != nil {
			l.logf("pglock: listener flags", err)
			l.setListening(false)
			l.closeConn(conn)
			conn = nil
			continue
		}
		if err := l.wait(conn); err != nil {
			l.logf("pglock: listener lost", err)
			l.setListening(false)
			l.closeConn(conn)
			conn = nil
		}
	}
}

func (l *listener) connect() (*pgxpool.Conn, error) {
	// From b.g's context: Close must not wait out a slow connect.
	ctx, cancel := context.WithTimeout(l.b.g.Context(), l.b.cfg.connectTimeout)
	defer cancel()
	conn, err := l.b.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("pglock: listener connect: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.b.names.channel}.Sanitize()); err != nil {
		_ = conn.Conn().Close(context.Background())
		conn.Release()
		return nil, fmt.Errorf("pglock: listen: %w", err)
	}
	l.mu.Lock()
	for hash, f := range l.flags { // a new session holds no flag yet
		if f.held {
			f.held = false
			f.ready = make(chan struct{})
		}
		if f.refs == 0 {
			delete(l.flags, hash)
		}
	}
	l.mu.Unlock()
	return conn, nil
}

func (l *listener) setListening(on bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if on == l.listening {
		return
	}
	l.listening = on
	if on {
		close(l.up)
	} else {
		l.up = make(chan struct{})
	}
}

func (l *listener) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failErr = err
	close(l.failed)
	l.failed = make(chan struct{})
}

// syncFlags takes the flags that waiters need and drops those idle for
// longer than flagLinger, in one statement.
func (l *listener) syncFlags(conn *pgxpool.Conn) error {
	now := time.Now()
	var take, drop []int64
	l.mu.Lock()
	for hash, f := range l.flags {
		switch {
		case f.refs > 0 && !f.held:
			take = append(take, hash)
		case f.refs == 0 && f.held && now.Sub(f.idle) > flagLinger:
			drop = append(drop, hash)
		}
	}
	l.mu.Unlock()
	if len(take) == 0 && len(drop) == 0 {
		return nil
	}
	var sb strings.Builder
	sb.WriteString("SELECT 1")
	for _, h := range take {
		a, c := waitFlag(h)
		fmt.Fprintf(&sb, ", pg_advisory_lock_shared(%d, %d)", a, c)
	}
	for _, h := range drop {
		a, c := waitFlag(h)
		fmt.Fprintf(&sb, ", pg_advisory_unlock_shared(%d, %d)", a, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.b.cfg.stmtTimeout)
	defer cancel()
	if _, err := conn.Conn().PgConn().Exec(ctx, sb.String()).ReadAll(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, h := range take {
		if f := l.flags[h]; f != nil && !f.held {
			f.held = true
			close(f.ready)
			if f.refs == 0 {
				f.idle = now
			}
		}
	}
	for _, h := range drop {
		if f := l.flags[h]; f != nil && f.refs == 0 {
			delete(l.flags, h)
		} else if f != nil { // wanted again meanwhile: take it again next round
			f.held = false
			f.ready = make(chan struct{})
			l.kicked = true
		}
	}
	return nil
}

// wait blocks for one notification, a kick (new flags wanted, Close), or
// the health interval, after which it pings the connection.
func (l *listener) wait(conn *pgxpool.Conn) error {
	ctx, cancel := context.WithTimeout(context.Background(), l.b.cfg.health)
	defer cancel()
	l.mu.Lock()
	if l.kicked {
		l.kicked = false
		cancel()
	} else {
		l.interrupt = cancel
	}
	l.mu.Unlock()
	n, err := conn.Conn().WaitForNotification(ctx)
	l.mu.Lock()
	l.interrupt = nil
	l.mu.Unlock()
	if n != nil {
		l.b.dispatch(n.Payload)
		return nil
	}
	if conn.Conn().IsClosed() {
		return err
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		pctx, pcancel := context.WithTimeout(context.Background(), l.b.cfg.health)
		defer pcancel()
		return conn.Ping(pctx)
	}
	return nil // kicked
}

func (l *listener) closeConn(conn *pgxpool.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Conn().Close(ctx) // drops LISTEN and the flags with the session
	conn.Release()
}

func (l *listener) logf(msg string, err error) {
	if lg := l.b.cfg.logger; lg != nil {
		lg.Warn(msg, "err", err)
	}
}
