package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/patterns/leader"
)

// leaderInfo is the JSON form of a leader.
type leaderInfo struct {
	Election string    `json:"election"`
	Leader   string    `json:"leader"` // "" while vacant
	Term     uint64    `json:"term"`
	Since    time.Time `json:"since,omitzero"`
	TTLMs    int64     `json:"ttl_ms"`
}

// leader shows who leads the election name (patterns/leader), or with
// --watch follows every change until interrupted (or until --count
// leaders have been shown; vacancies are shown but not counted).
func (c *cli) leader(ctx context.Context, b driver.Backend, name string) int {
	var nb driver.Backend = noClose{b}
	var in driver.Inspector
	if driver.As(b, &in) {
		nb = inspectorNoClose{noClose{b}, in} // Leader reads through the Inspector
	}
	locks := lockx.New(nb)
	defer locks.Close()
	e, err := leader.New(locks, name, leader.WithPollInterval(c.opts.interval))
	if err != nil {
		return c.fail(err)
	}
	if !c.opts.watch {
		cctx, cancel := context.WithTimeout(ctx, c.opts.timeout)
		defer cancel()
		info, err := e.Leader(cctx)
		if errors.Is(err, leader.ErrNoLeader) {
			return c.fail(fmt.Errorf("%q: %w", name, lockx.ErrNotHeld))
		}
		if err != nil {
			return c.fail(err)
		}
		return c.printLeader(name, info)
	}
	if !driver.As(b, new(driver.Inspector)) {
		return c.fail(lockx.ErrNoInspector)
	}
	changes, err := e.Observe(ctx)
	if err != nil {
		return c.fail(err)
	}
	n := 0
	for info := range changes {
		if code := c.printLeader(name, info); code != exitOK {
			return code
		}
		if info.Term == 0 {
			continue // --count counts leaders; a vacancy is shown but not counted
		}
		if n++; c.opts.count > 0 && n >= c.opts.count {
			return exitOK
		}
	}
	return exitOK
}

func (c *cli) printLeader(name string, info leader.Info) int {
	if c.opts.json {
		return c.printJSON(leaderInfo{Election: name, Leader: info.Identity, Term: uint64(info.Term), Since: info.Since.UTC(), TTLMs: info.TTL.Milliseconds()})
	}
	if info.Term == 0 {
		fmt.Fprintf(c.out, "%s: no leader\n", name)
		return exitOK
	}
	since := "?"
	if !info.Since.IsZero() {
		since = info.Since.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(c.out, "%s: leader %s, term %d, since %s, lease left %s\n", name, info.Identity, info.Term, since, fmtDur(info.TTL))
	return exitOK
}

// inspectorNoClose is noClose keeping the backend's Inspector.
type inspectorNoClose struct {
	noClose
	driver.Inspector
}
