// Package leadertest is a conformance suite for leader elections over a
// lockx backend: a backend whose clients pass Run serves patterns/leader.
// Each backend of this module runs it from its own tests:
//
//	func TestLeader(t *testing.T) {
//		b := memlock.New()
//		leadertest.Run(t, func(t *testing.T) *lockx.Client { … lockx.New(b) … })
//	}
package leadertest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/lockx-go/lockx/faults"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/patterns/leader"
)

// NewClient returns a new client of the backend under test, closed at the
// end of t: one "instance" of a service. Every client it returns must
// reach the same store, so that they compete for the same elections.
type NewClient func(t *testing.T) *lockx.Client

// Run checks the election pattern over the clients of newClient. It uses
// elections of its own (random names), so it may share a store.
func Run(t *testing.T, newClient NewClient) {
	t.Run("Args", func(t *testing.T) { testArgs(t, newClient) })
	t.Run("Resign", func(t *testing.T) { testResign(t, newClient) })
	t.Run("Loss", func(t *testing.T) { testLoss(t, newClient) })
	t.Run("Observe", func(t *testing.T) { testObserve(t, newClient) })
	t.Run("Run", func(t *testing.T) { testRun(t, newClient) })
	t.Run("Fence", func(t *testing.T) { testFence(t, newClient) })
}

// Name returns a fresh random election name with the given stem.
func Name(stem string) string { return stem + "-" + rand.Text()[:10] }

// Lease is the lease the suite campaigns with: long enough that a loaded
// machine renews in time, short enough that a wait for it would show.
const Lease = 4 * time.Second

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func elect(t *testing.T, c *lockx.Client, name, id string, opts ...leader.Option) *leader.Election {
	t.Helper()
	e, err := leader.New(c, name, append([]leader.Option{leader.WithIdentity(id), leader.WithLease(Lease)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func testArgs(t *testing.T, newClient NewClient) {
	c := newClient(t)
	for _, tc := range []struct {
		what string
		c    *lockx.Client
		name string
		opts []leader.Option
	}{
		{"nil client", nil, "x", nil},
		{"empty name", c, "", nil},
		{"negative lease", c, "x", []leader.Option{leader.WithLease(-time.Second)}},
		{"empty identity", c, "x", []leader.Option{leader.WithIdentity("")}},
		{"long identity", c, "x", []leader.Option{leader.WithIdentity(string(make([]byte, leader.MaxIdentityLen+1)))}},
		{"unprintable identity", c, "x", []leader.Option{leader.WithIdentity("a\x00b")}},
		{"zero poll interval", c, "x", []leader.Option{leader.WithPollInterval(0)}},
	} {
		e, err := leader.New(tc.c, tc.name, tc.opts...)
		var ae *lockx.ArgError
		if e != nil || !errors.Is(err, lockx.ErrInvalidArgument) || !errors.As(err, &ae) {
			t.Errorf("%s: New = %v, %v; want a *lockx.ArgError", tc.what, e, err)
		}
	}
	e := elect(t, c, Name("args"), "a")
	var nilCtx context.Context
	if _, err := e.Campaign(nilCtx); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Errorf("Campaign(nil) = %v, want ErrInvalidArgument", err)
	}
	if err := e.Run(ctxT(t), nil); !errors.Is(err, lockx.ErrInvalidArgument) {
		t.Errorf("Run(nil fn) = %v, want ErrInvalidArgument", err)
	}
	if _, err := e.Leader(ctxT(t)); !errors.Is(err, leader.ErrNoLeader) {
		t.Errorf("Leader of a fresh election = %v, want ErrNoLeader", err)
	}
}

// testResign: the leader is reported by Leader; Resign hands over to a
// waiting candidate at once (well within the lease) with a higher term.
func testResign(t *testing.T, newClient NewClient) {
	ctx := ctxT(t)
	name := Name("resign")
	ca := newClient(t)
	a, b := elect(t, ca, name, "a"), elect(t, newClient(t), name, "b")
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantLeader(t, a, "a", ta.Token())

	got := make(chan *leader.Term, 1)
	errc := make(chan error, 1)
	go func() {
		tb, err := b.Campaign(ctx)
		if err != nil {
			errc <- err
			return
		}
		got <- tb
	}()
	waitWaiting(t, ca, a)
	start := time.Now()
	if err := ta.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	var tb *leader.Term
	select {
	case tb = <-got:
	case err := <-errc:
		t.Fatal(err)
	case <-ctx.Done():
		t.Fatal("the waiting candidate never led")
	}
	handoff := time.Since(start)
	defer tb.Resign(context.Background())
	if handoff >= Lease/2 {
		t.Errorf("handover took %v: the next candidate waited for the lease (%v), not for the release", handoff, Lease)
	}
	if tb.Token() <= ta.Token() {
		t.Errorf("new term %d not above the resigned term %d", tb.Token(), ta.Token())
	}
	if cause := context.Cause(ta.Context()); !errors.Is(cause, leader.ErrResigned) {
		t.Errorf("resigned term's context cause = %v, want ErrResigned", cause)
	}
	if tb.Context().Err() != nil {
		t.Errorf("new leader's context already done: %v", context.Cause(tb.Context()))
	}
	if err := ta.Resign(ctx); err != nil {
		t.Errorf("second Resign = %v, want nil", err)
	}
	wantLeader(t, b, "b", tb.Token())
	t.Logf("handover %v", handoff)
}

// waitWaiting waits until a candidate is queued behind e's leader, so that
// the handover measured is a wake-up. Where the backend cannot count its
// waiters it gives the candidate a moment: the assertions hold either way,
// only what they exercise differs.
func waitWaiting(t *testing.T, c *lockx.Client, e *leader.Election) {
	t.Helper()
	var in driver.Inspector
	ok := driver.As(c.Backend(), &in)
	deadline := time.Now().Add(5 * time.Second)
	for ok && time.Now().Before(deadline) {
		li, err := in.Lock(t.Context(), e.Key())
		if err != nil || li.Waiters < 0 {
			break
		}
		if li.Waiters > 0 {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
}

func wantLeader(t *testing.T, e *leader.Election, id string, term lockx.Token) {
	t.Helper()
	info, err := e.Leader(t.Context())
	if err != nil {
		t.Fatalf("Leader: %v", err)
	}
	if info.Identity != id || info.Term != term {
		t.Errorf("Leader = %q term %d, want %q term %d", info.Identity, info.Term, id, term)
	}
}

// testLoss: a leader evicted at the backend (lockx.ForceUnlock, as an
// operator would) sees its term's context cancelled with ErrLost once its
// renewal fails, and a candidate takes over with a higher term.
func testLoss(t *testing.T, newClient NewClient) {
	ctx := ctxT(t)
	name := Name("loss")
	ca := newClient(t)
	a, b := elect(t, ca, name, "a"), elect(t, newClient(t), name, "b")
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockx.ForceUnlock(ctx, ca.Backend(), a.Key()); err != nil {
		t.Fatalf("ForceUnlock: %v", err)
	}
	tb, err := b.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Resign(context.Background())
	if tb.Token() <= ta.Token() {
		t.Errorf("new term %d not above the evicted term %d", tb.Token(), ta.Token())
	}
	select {
	case <-ta.Done():
	case <-time.After(2 * Lease):
		t.Fatalf("evicted leader's context not cancelled within %v", 2*Lease)
	}
	cause := context.Cause(ta.Context())
	var ee *leader.EndError
	if !errors.Is(cause, lockx.ErrLost) || !errors.As(cause, &ee) || ee.Term != ta.Token() || ee.Identity != "a" {
		t.Errorf("evicted term's cause = %v, want an *EndError for term %d matching lockx.ErrLost", cause, ta.Token())
	}
	if err := ta.Resign(ctx); err != nil {
		t.Errorf("Resign of a lost term = %v, want nil", err)
	}
	wantLeader(t, b, "b", tb.Token())
}

// span is one term as its holder saw it, on this process's clock.
type span struct {
	id         int
	term       lockx.Token
	call, ret  int64 // Campaign called, returned
	rcall, end int64 // Resign called, returned
}

// testObserve runs three candidates through a series of terms while an
// observer watches: the observer sees every term in order, with the right
// identity, and the holders' history passes the fenced-mutex model (no two
// leaders at once, terms rising).
func testObserve(t *testing.T, newClient NewClient) {
	const (
		poll  = 20 * time.Millisecond
		hold  = 250 * time.Millisecond // ≫ poll: every term is seen
		terms = 6
		// observeCap bounds how long a holder waits for the observer to
		// report its term.
		observeCap = 10 * time.Second
	)
	tctx := ctxT(t)
	ctx, cancel := context.WithCancel(tctx) // the candidates'
	defer cancel()
	name := Name("observe")
	obs := elect(t, newClient(t), name, "observer", leader.WithPollInterval(poll))
	octx, ostop := context.WithCancel(tctx)
	ch, err := obs.Observe(octx)
	if err != nil {
		t.Fatal(err)
	}
	var (
		smu    sync.Mutex
		seen   []leader.Info
		vacant = make(chan struct{}, 1)
	)
	observedTerm := func(term lockx.Token) bool {
		smu.Lock()
		defer smu.Unlock()
		return slices.ContainsFunc(seen, func(info leader.Info) bool { return info.Term == term })
	}
	odone := make(chan struct{})
	go func() {
		defer close(odone)
		for info := range ch {
			smu.Lock()
			seen = append(seen, info)
			smu.Unlock()
			if info.Term == 0 {
				select {
				case vacant <- struct{}{}:
				default:
				}
			}
		}
	}()

	var (
		mu    sync.Mutex
		spans []span
		// cutoff is the highest term held when the test stopped the
		// candidates. A campaign abandoned by that cancellation may still
		// have been granted for a moment (the Client releases a grant its
		// caller no longer waits for), so Observe may rightly report a term
		// above cutoff that no candidate held.
		cutoff lockx.Token
		wg     sync.WaitGroup
		errs   = make(chan error, 3)
	)
	base := time.Now()
	now := func() int64 { return int64(time.Since(base)) }
	for i := range 3 {
		e := elect(t, newClient(t), name, fmt.Sprintf("cand-%d", i))
		wg.Go(func() {
			for ctx.Err() == nil {
				call := now()
				tm, err := e.Campaign(ctx)
				if err != nil {
					if ctx.Err() == nil {
						errs <- err
					}
					return
				}
				s := span{id: i, term: tm.Token(), call: call, ret: now()}
				// Hold the term for hold, and on until the observer has
				// reported it (observeCap at most): a polling observer starved
				// of CPU for longer than a term (a loaded CI machine) would
				// otherwise miss it through no fault of Observe's. A term
				// Observe never reports is still held only observeCap, and the
				// check below fails.
				minHold := time.After(hold)
				capped := time.After(observeCap)
			holding:
				for minDone := false; ; {
					select {
					case <-minHold:
						minDone = true
					case <-capped:
						break holding
					case <-tm.Done():
						errs <- fmt.Errorf("cand-%d lost term %d: %v", i, tm.Token(), context.Cause(tm.Context()))
						break holding
					case <-time.After(poll):
					}
					if minDone && observedTerm(tm.Token()) {
						break holding
					}
				}
				s.rcall = now()
				err = tm.Resign(context.WithoutCancel(ctx))
				s.end = now()
				mu.Lock()
				spans = append(spans, s)
				if len(spans) == terms {
					for _, s := range spans {
						cutoff = max(cutoff, s.term)
					}
					cancel()
				}
				mu.Unlock()
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	// The last term is over: wait for the observer to report the vacancy
	// after it. A vacancy reported earlier (between two terms) does not
	// count: the observer may not have read the last term yet.
	var final lockx.Token
	for _, s := range spans {
		final = max(final, s.term)
	}
	for waiting := true; waiting; {
		select {
		case <-vacant:
			smu.Lock()
			waiting = seen[len(seen)-1].Term != 0 || !slices.ContainsFunc(seen, func(info leader.Info) bool { return info.Term >= final })
			smu.Unlock()
		case <-time.After(5 * time.Second):
			waiting = false
		}
	}
	ostop()
	<-odone
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	slices.SortFunc(spans, func(a, b span) int { return int(a.ret - b.ret) })
	if err := checkHistory(spans); err != nil {
		t.Error(err)
	}

	var observed []leader.Info
	for _, info := range seen {
		if info.Term != 0 {
			observed = append(observed, info)
		}
	}
	for i := 1; i < len(observed); i++ {
		if observed[i].Term <= observed[i-1].Term {
			t.Errorf("Observe sent term %d after term %d", observed[i].Term, observed[i-1].Term)
		}
	}
	held := make(map[lockx.Token]bool, len(spans))
	for _, s := range spans {
		held[s.term] = true
	}
	observed = slices.DeleteFunc(observed, func(info leader.Info) bool {
		if held[info.Term] {
			return false
		}
		if info.Term <= cutoff {
			t.Errorf("Observe reported term %d (%q), which no candidate held, before the candidates stopped (cutoff term %d)", info.Term, info.Identity, cutoff)
		}
		return true
	})
	if len(observed) != len(spans) {
		t.Fatalf("Observe saw %d of the terms the candidates held, they held %d: %+v vs %+v", len(observed), len(spans), observed, spans)
	}
	for i, s := range spans {
		if o := observed[i]; o.Term != s.term || o.Identity != fmt.Sprintf("cand-%d", s.id) {
			t.Errorf("term #%d: observed %q term %d, held by cand-%d term %d", i, o.Identity, o.Term, s.id, s.term)
		}
	}
	if last := seen[len(seen)-1]; last.Term != 0 {
		t.Errorf("Observe did not report the vacancy after the last resignation (last: %+v); seen %+v spans %+v", last, seen, spans)
	}
}

// testRun: Run serves a term, campaigns again after a loss, and stops after
// the first term with Once.
func testRun(t *testing.T, newClient NewClient) {
	ctx := ctxT(t)
	name := Name("run")
	c := newClient(t)
	e := elect(t, c, name, "a")

	var terms []lockx.Token
	err := e.Run(ctx, func(ctx context.Context, tm *leader.Term) error {
		terms = append(terms, tm.Token())
		if tm.Context().Err() != nil {
			return fmt.Errorf("fn called for a term already over")
		}
		return nil
	}, leader.Once())
	if err != nil || len(terms) != 1 {
		t.Fatalf("Run(Once) = %v after %d terms, want nil after 1", err, len(terms))
	}
	if _, err := e.Leader(ctx); !errors.Is(err, leader.ErrNoLeader) {
		t.Errorf("after Run(Once) returned, Leader = %v, want ErrNoLeader (resigned)", err)
	}

	rctx, stop := context.WithCancelCause(ctx)
	stopped := errors.New("test over")
	err = e.Run(rctx, func(fctx context.Context, tm *leader.Term) error {
		terms = append(terms, tm.Token())
		if len(terms) == 2 {
			if _, err := lockx.ForceUnlock(ctx, c.Backend(), e.Key()); err != nil {
				return err
			}
		} else {
			stop(stopped)
		}
		<-fctx.Done()
		return context.Cause(fctx)
	})
	if !errors.Is(err, stopped) {
		t.Errorf("Run = %v, want the cause of its context", err)
	}
	if len(terms) != 3 || !(terms[0] < terms[1] && terms[1] < terms[2]) {
		t.Errorf("Run's terms = %v, want three rising terms (once, lost, stopped)", terms)
	}
	if _, err := e.Leader(ctx); !errors.Is(err, leader.ErrNoLeader) {
		t.Errorf("after Run returned, Leader = %v, want ErrNoLeader (resigned)", err)
	}
}

// testFence: where the backend keeps fences (driver.FenceStore), a deposed
// leader's term is refused once its successor has written.
func testFence(t *testing.T, newClient NewClient) {
	ctx := ctxT(t)
	c := newClient(t)
	var fs driver.FenceStore
	ok := driver.As(c.Backend(), &fs)
	if !ok {
		t.Skip("the backend keeps no fences (no driver.FenceStore); resources fence the term themselves")
	}
	name := Name("fence")
	a, b := elect(t, c, name, "a"), elect(t, newClient(t), name, "b")
	res := "leadertest:" + name
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.Fence(ctx, res, ta.Token()); err != nil {
		t.Fatal(err)
	}
	if err := ta.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	tb, err := b.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Resign(context.Background())
	if err := fs.Fence(ctx, res, tb.Token()); err != nil {
		t.Fatal(err)
	}
	if err := fs.Fence(ctx, res, ta.Token()); !errors.Is(err, lockx.ErrStaleToken) {
		t.Errorf("deposed term %d fenced after term %d: %v, want ErrStaleToken", ta.Token(), tb.Token(), err)
	}
}

// checkHistory checks the leaders' history against the fenced-mutex model
// (porcupine): no two leaders at once, each term above the earlier ones.
func checkHistory(spans []span) error {
	var ops []porcupine.Operation
	for _, s := range spans {
		ops = append(ops,
			porcupine.Operation{ClientId: s.id, Input: faults.MutexIn{Client: s.id}, Output: faults.MutexOut{OK: true, Token: uint64(s.term)}, Call: s.call, Return: s.ret},
			porcupine.Operation{ClientId: s.id, Input: faults.MutexIn{Release: true, Client: s.id}, Output: faults.MutexOut{OK: true}, Call: s.rcall, Return: s.end})
	}
	if res := porcupine.CheckOperationsTimeout(faults.MutexModel, ops, 10*time.Second); res != porcupine.Ok {
		return fmt.Errorf("the leaders' history fails the fenced-mutex model (%v): two leaders at once or a term not rising: %+v", res, spans)
	}
	return nil
}
