package pglock

import "time"

// WithWaitSlice sets how long one blocking acquisition on a wait session
// waits before it is retried (tests only; default 200 ms).
func WithWaitSlice(d time.Duration) Option { return func(c *config) { c.waitSlice = d } }

// FenceMargin is how far the fence guard moves the sequence after a reset.
const FenceMargin = fenceMargin

// FairStatements is how many statements fair attempts have sent.
func (b *Backend) FairStatements() int64 { return b.fairSent.Load() }

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
