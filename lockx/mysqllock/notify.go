package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/internal/backendkit"
	"strings"
	"sync"
	"time"
)

// hub holds a Backend's watchers, so that a release through the Backend
// wakes its waiters at once; releases elsewhere reach them by polling.
type hub struct {
	mu       sync.Mutex
	watchers backendkit.Registry[string, struct{}] // by lock name
}

func (h *hub) add(name string) (*backendkit.Watcher[struct{}], func()) {
	h.mu.Lock()
	w := h.watchers.Add(name, "")
	h.mu.Unlock()
	var once sync.Once
	return w, func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.watchers.Remove(name, w)
			if w.Pending() { // a wake-up this watcher did not use: pass it on
				h.watchers.WakeFirst(name, true)
			}
		})
	}
}

// wake wakes every watcher of name: for fair releases (only the queue's
// head can take the lock, and this process does not know who it is),
// losses, expiries and frees seen by polling.
func (h *hub) wake(name string) {
	h.mu.Lock()
	h.watchers.WakeAll(name)
	h.mu.Unlock()
}

// wakeOne wakes the longest-registered watcher of name, for a plain
// release: one waiter can take the lock, so waking all would only make
// the others' attempts fail against the winner's grant. A woken watcher
// that leaves without using its wake-up passes it on.
func (h *hub) wakeOne(name string) {
	h.mu.Lock()
	h.watchers.WakeFirst(name, true)
	h.mu.Unlock()
}

// poller checks, while a Backend has waiters, whether their keys were freed
// by another process, and wakes them: one query per interval for all
// watched names, however many wait.
type poller struct {
	hub      *hub
	interval time.Duration
	check    func(ctx context.Context, names []string) (free []bool, err error)

	mu      sync.Mutex
	watched map[string]*pollState
	running bool
	g       backendkit.Group // the loop, while anything is watched
}

type pollState struct {
	refs int
	seen bool // observed held since watched
}

func newPoller(h *hub, interval time.Duration, check func(context.Context, []string) ([]bool, error)) *poller {
	return &poller{hub: h, interval: interval, check: check, watched: map[string]*pollState{}}
}

func (p *poller) watch(name string) func() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.g.Closed() {
		return func() {}
	}
	s := p.watched[name]
	if s == nil {
		s = &pollState{}
		p.watched[name] = s
	}
	s.refs++
	if !p.running {
		p.running = p.g.Go(p.loop)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			p.mu.Lock()
			s.refs--
			if s.refs == 0 && p.watched[name] == s {
				delete(p.watched, name)
			}
			p.mu.Unlock()
		})
	}
}

func (p *poller) loop() {
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		select {
		case <-p.g.Done():
			return
		case <-t.C:
		}
		p.mu.Lock()
		if len(p.watched) == 0 {
			p.running = false
			p.mu.Unlock()
			return
		}
		names := make([]string, 0, len(p.watched))
		for n := range p.watched {
			names = append(names, n)
		}
		p.mu.Unlock()
		for len(names) > 0 {
			batch := names[:min(len(names), 200)]
			names = names[len(batch):]
			ctx, cancel := context.WithTimeout(context.Background(), 2*p.interval+time.Second)
			free, err := p.check(ctx, batch)
			cancel()
			if err != nil {
				continue
			}
			for i, n := range batch {
				p.mu.Lock()
				s := p.watched[n]
				wake := false
				if s != nil {
					if free[i] {
						wake = true
						s.seen = false
					} else {
						s.seen = true
					}
				}
				p.mu.Unlock()
				if wake {
					p.hub.wake(n)
				}
			}
		}
	}
}

func (p *poller) close() { p.g.Close() }

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// queryBools runs a one-row query of n boolean columns.
func queryBools(ctx context.Context, db *sql.DB, q string, args []any, n int) ([]bool, error) {
	out := make([]bool, n)
	dst := make([]any, n)
	vals := make([]sql.NullInt64, n)
	for i := range dst {
		dst[i] = &vals[i]
	}
	if err := db.QueryRowContext(ctx, q, args...).Scan(dst...); err != nil {
		return nil, err
	}
	for i := range vals {
		out[i] = vals[i].Valid && vals[i].Int64 != 0
	}
	return out, nil
}

// watch is both Backends' driver.Notifier: a release through the Backend
// wakes at once through its hub; releases and expiries elsewhere (other
// processes, other Backends) are seen by polling while anything waits.
func watch(h *hub, p *poller, name string) (<-chan struct{}, func(), error) {
	w, cancelHub := h.add(name)
	cancelPoll := p.watch(name)
	return w.C(), func() { cancelPoll(); cancelHub() }, nil
}

// queryTTL runs a Backend's TTL statement (which yields the remaining lease
// in µs, or no row) for name and owner.
func queryTTL(ctx context.Context, db *sql.DB, query, name string, owner driver.Owner) (time.Duration, error) {
	var us int64
	err := db.QueryRowContext(ctx, query, name, string(owner)).Scan(&us)
	if errors.Is(err, sql.ErrNoRows) || err == nil && us <= 0 {
		return 0, driver.ErrNotHeld
	}
	if err != nil {
		return 0, driver.Unavailable("ttl", err)
	}
	return time.Duration(us) * time.Microsecond, nil
}
