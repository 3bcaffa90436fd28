package leader

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
)

// Info describes who leads an election.
type Info struct {
	Identity string      // the leader's identity (WithIdentity)
	Term     lockx.Token // its term: the fencing token of the leader's lock
	// Since is when the term began, if the backend records grant times
	// (memlock, pglock); otherwise Leader leaves it zero and Observe sets
	// it to when it first saw the term.
	Since time.Time
	// TTL is the lease the leader has left, as the backend reported it (0
	// if it cannot tell).
	TTL time.Duration
}

// Leader returns who leads now, read from the backend, or ErrNoLeader.
// It needs a backend that can describe a held lock (driver.Inspector: every
// backend of this module does); other backends give lockx.ErrNoInspector.
func (e *Election) Leader(ctx context.Context) (Info, error) {
	if ctx == nil {
		return Info{}, fmt.Errorf("leader: %w", &lockx.ArgError{Arg: "ctx", Reason: "nil"})
	}
	var in driver.Inspector
	ok := driver.As(e.c.Backend(), &in)
	if !ok {
		return Info{}, fmt.Errorf("leader: %q: %w", e.name, lockx.ErrNoInspector)
	}
	li, err := in.Lock(ctx, e.key)
	if errors.Is(err, lockx.ErrNotHeld) {
		return Info{}, ErrNoLeader
	}
	if err != nil {
		return Info{}, fmt.Errorf("leader: who leads %q: %w", e.name, err)
	}
	info := Info{Identity: identityOf(li.Owner), Term: li.Token, TTL: li.TTL}
	if li.Age > 0 {
		info.Since = time.Now().Add(-li.Age)
	}
	return info, nil
}

// Observe streams the changes of leader: a new Info each time a leader
// with a higher term than the last one sent is seen, and the zero Info
// when the office falls vacant. It reads the leader every poll interval
// (WithPollInterval), so a term shorter than that may be missed; terms
// are sent in increasing order, never repeated. The channel is closed when
// ctx ends. A read that fails is retried at the next interval.
func (e *Election) Observe(ctx context.Context) (<-chan Info, error) {
	if ctx == nil {
		return nil, fmt.Errorf("leader: %w", &lockx.ArgError{Arg: "ctx", Reason: "nil"})
	}
	if !driver.As(e.c.Backend(), new(driver.Inspector)) {
		return nil, fmt.Errorf("leader: %q: %w", e.name, lockx.ErrNoInspector)
	}
	ch := make(chan Info)
	go e.observe(ctx, ch)
	return ch, nil
}

func (e *Election) observe(ctx context.Context, ch chan<- Info) {
	defer close(ch)
	tick := time.NewTicker(e.cfg.poll)
	defer tick.Stop()
	var last lockx.Token
	vacant := false
	for {
		info, err := e.Leader(ctx)
		var send *Info
		switch {
		case errors.Is(err, ErrNoLeader):
			if last != 0 && !vacant {
				vacant = true
				send = &Info{}
			}
		case err == nil && info.Term > last:
			last, vacant = info.Term, false
			if info.Since.IsZero() {
				info.Since = time.Now()
			}
			send = &info
		}
		if send != nil {
			select {
			case ch <- *send:
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}
