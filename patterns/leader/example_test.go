package leader_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/patterns/leader"
)

// Two instances campaign for one office; the first leads, resigns, and the
// second takes over with a higher term.
func ExampleElection_Campaign() {
	store := memlock.New() // stands for the Redis, PostgreSQL… every instance reaches
	a := lockx.New(store)
	defer a.Close()
	b := lockx.New(store)
	defer b.Close()
	ctx := context.Background()

	ea, _ := leader.New(a, "scheduler", leader.WithIdentity("node-a"))
	eb, _ := leader.New(b, "scheduler", leader.WithIdentity("node-b"))

	ta, err := ea.Campaign(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	who, _ := eb.Leader(ctx)
	fmt.Println("leader:", who.Identity)

	next := make(chan *leader.Term)
	go func() {
		tb, _ := eb.Campaign(ctx) // waits for node-a
		next <- tb
	}()
	_ = ta.Resign(ctx) // node-b is woken at once
	tb := <-next
	defer tb.Resign(ctx)

	fmt.Println("old term ended by resignation:", errors.Is(context.Cause(ta.Context()), leader.ErrResigned))
	fmt.Println("new term is higher:", tb.Token() > ta.Token())
	who, _ = ea.Leader(ctx)
	fmt.Println("leader:", who.Identity)
	// Output:
	// leader: node-a
	// old term ended by resignation: true
	// new term is higher: true
	// leader: node-b
}

// Run leads until its context ends, campaigning again after a loss; Once
// stops after the first term. The term fences the leader's writes.
func ExampleElection_Run() {
	store := memlock.New()
	locks := lockx.New(store)
	defer locks.Close()
	e, _ := leader.New(locks, "compactor", leader.WithIdentity("node-a"))

	err := e.Run(context.Background(), func(ctx context.Context, t *leader.Term) error {
		// A resource that keeps the highest term refuses a deposed leader.
		if err := store.Fence(ctx, "segments", t.Token()); err != nil {
			return err
		}
		fmt.Println(t.Identity(), "leads and wrote with its term")
		return nil
	}, leader.Once())
	fmt.Println("run:", err)
	// Output:
	// node-a leads and wrote with its term
	// run: <nil>
}
