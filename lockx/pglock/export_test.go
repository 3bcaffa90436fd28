package pglock

import "time"

// WithWaitSlice sets how long one blocking acquisition on a wait session
// waits before it is retried (tests only; default 200 ms).
func WithWaitSlice(d time.Duration) Option { return func(c *config) { c.waitSlice = d } }

// FenceMargin is how far the fence guard moves the sequence after a reset.
const FenceMargin = fenceMargin

// FairStatements is how many statements fair attempts have sent.
func (b *Backend) FairStatements() int64 { return b.fairSent.Load() }
