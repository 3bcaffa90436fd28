package lockx

import (
	"errors"
	"math/rand/v2"
	"time"
)

func isNotHeld(err error) bool { return errors.Is(err, ErrNotHeld) }

// backoff is exponential with full jitter between min and the current cap.
type backoff struct {
	min, max, cur time.Duration
}

func newBackoff(min, max time.Duration) backoff { return backoff{min: min, max: max, cur: min} }

func (b *backoff) next() time.Duration {
	d := b.cur
	if b.cur < b.max {
		b.cur *= 2
		if b.cur > b.max {
			b.cur = b.max
		}
	}
	// Jitter in [d/2, d): spreads waiters without ever waiting less than min/2.
	return d/2 + rand.N(d/2+1)
}
