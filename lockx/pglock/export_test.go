package pglock

import (
	"strconv"
	"time"
)

// WithWaitSlice sets how long one blocking acquisition on a wait session
// waits before it is retried (tests only; default 200 ms).
func WithWaitSlice(d time.Duration) Option { return func(c *config) { c.waitSlice = d } }

// FenceMargin is how far the fence guard moves the sequence after a reset.
const FenceMargin = fenceMargin

// FairStatements is how many statements fair attempts have sent.
func (b *Backend) FairStatements() int64 { return b.fairSent.Load() }

// Contended reports whether key is marked as contended: a waiting attempt
// goes straight to a wait session (hotFor).
func (b *Backend) Contended(key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return time.Since(b.refused[b.hash(key)]) < hotFor
}

// Connected reports how many holder and wait sessions are connected and
// whether the listener is up.
func (b *Backend) Connected() (holder, wait int, listening bool) {
	for i := range b.sessions {
		if s := b.sessions[i].cur.Load(); s != nil && !s.isDead() {
			if i < b.cfg.sessions {
				holder++
			} else {
				wait++
			}
		}
	}
	b.lst.mu.Lock()
	defer b.lst.mu.Unlock()
	return holder, wait, b.lst.listening
}

// Handoff is what a hot key's handoff sends on a wait session, without the
// Backend around it: the session settings, the blocking grant and the
// release statements for schema, and their arguments for key and owner
// (the Backend's defaults: namespace, a one-minute lease, the wait slice).
// BenchmarkHotKey runs it on raw connections as the floor of pglock's own
// design.
type Handoff struct {
	Settings, Grant, Release string
	GrantArgs, ReleaseArgs   []any
}

// HandoffFor returns the Handoff of key and owner in schema.
func HandoffFor(schema, key string, owner []byte) Handoff {
	n := newNames(schema)
	st := n.statements(true)
	hash := keyHash(defaultConfig().namespace, key)
	w1, w2 := waitFlag(hash)
	return Handoff{
		Settings:    sessionSettings,
		Grant:       st[stAcquireWait],
		Release:     st[stRelease],
		GrantArgs:   []any{hash, strconv.FormatInt(ms(defaultWaitSlice), 10) + "ms"},
		ReleaseArgs: []any{hash, owner, w1, w2, n.channel, strconv.FormatInt(hash, 10)},
	}
}

// WithKeyID forces the advisory-lock id of every key (tests only: a
// colliding pair without searching for one).
func WithKeyID(f func(key string) int64) Option {
	return func(c *config) { c.idHook = func(_, key string) int64 { return f(key) } }
}
