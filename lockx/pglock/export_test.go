package pglock

import "time"

// WithWaitSlice sets how long one blocking acquisition on a wait session
// waits before it is retried (tests only; default 200 ms).
func WithWaitSlice(d time.Duration) Option { return func(c *config) { c.waitSlice = d } }
