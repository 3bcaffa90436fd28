package leader_test

import (
	"context"
	"errors"
	"testing"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/patterns/leader"
)

// TestRunFnFails: an error from fn while still leading ends Run with that
// error (no silent re-campaign), and the term is resigned.
func TestRunFnFails(t *testing.T) {
	c := lockx.New(memlock.New())
	defer c.Close()
	e, err := leader.New(c, "x", leader.WithIdentity("a"))
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	calls := 0
	err = e.Run(t.Context(), func(context.Context, *leader.Term) error { calls++; return boom })
	if !errors.Is(err, boom) || calls != 1 {
		t.Errorf("Run = %v after %d calls, want boom after 1", err, calls)
	}
	if _, err := e.Leader(t.Context()); !errors.Is(err, leader.ErrNoLeader) {
		t.Errorf("after Run failed, Leader = %v, want ErrNoLeader", err)
	}
}

// TestClosedClient: a campaign on a closed client fails with lockx.ErrClosed,
// and a term ends with it when its client closes.
func TestClosedClient(t *testing.T) {
	c := lockx.New(memlock.New())
	e, _ := leader.New(c, "x")
	tm, err := e.Campaign(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	<-tm.Done()
	if cause := context.Cause(tm.Context()); !errors.Is(cause, lockx.ErrClosed) {
		t.Errorf("term cause after Close = %v, want lockx.ErrClosed", cause)
	}
	if _, err := e.Campaign(t.Context()); !errors.Is(err, lockx.ErrClosed) {
		t.Errorf("Campaign on a closed client = %v, want lockx.ErrClosed", err)
	}
	if err := e.Run(t.Context(), func(context.Context, *leader.Term) error { return nil }); !errors.Is(err, lockx.ErrClosed) {
		t.Errorf("Run on a closed client = %v, want lockx.ErrClosed", err)
	}
}
