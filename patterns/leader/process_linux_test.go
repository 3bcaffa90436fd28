package leader_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/lockx-go/lockx/patterns/leader"
)

// child is a running candidate process and its output lines.
type child struct {
	cmd   *exec.Cmd
	lines chan string
}

func startChild(t *testing.T, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{childEnv + "=1"}, env...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // dies with the test binary
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ch := &child{cmd: cmd, lines: make(chan string, 1024)}
	go func() {
		defer close(ch.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			ch.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		for range ch.lines { // drain until the pipe closes, then reap
		}
		_ = cmd.Wait()
	})
	return ch
}

// next returns the child's next line, failing t after d.
func (c *child) next(t *testing.T, d time.Duration) string {
	t.Helper()
	select {
	case l, ok := <-c.lines:
		if !ok {
			t.Fatal("the child exited")
		}
		if strings.HasPrefix(l, "ERR") {
			t.Fatalf("child: %s", l)
		}
		return l
	case <-time.After(d):
		t.Fatalf("no line from the child within %v", d)
	}
	return ""
}

func (c *child) lead(t *testing.T) lockx.Token {
	t.Helper()
	l := c.next(t, 30*time.Second)
	n, err := strconv.ParseUint(strings.TrimPrefix(l, "LEAD "), 10, 64)
	if !strings.HasPrefix(l, "LEAD ") || err != nil {
		t.Fatalf("child said %q, want LEAD <term>", l)
	}
	return lockx.Token(n)
}

type redisEnv struct {
	addr, prefix string
	rdb          *redis.Client
}

func newRedisEnv(t *testing.T) redisEnv {
	addr := testenv.RedisAddr(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	return redisEnv{addr: addr, prefix: "lockxtest:leader:" + rand.Text()[:8] + ":", rdb: rdb}
}

func (r redisEnv) childEnv(name string, lease time.Duration) []string {
	return []string{"LEADER_TEST_REDIS=" + r.addr, "LEADER_TEST_PREFIX=" + r.prefix, "LEADER_TEST_NAME=" + name, "LEADER_TEST_LEASE=" + lease.String()}
}

// backend returns a backend of the env's store, and a client over it, both
// closed at cleanup.
func (r redisEnv) client(t *testing.T) (*redislock.Backend, *lockx.Client) {
	b := redislock.New(r.rdb, redislock.WithPrefix(r.prefix))
	c := lockx.New(b)
	t.Cleanup(func() { _ = c.Close() })
	return b, c
}

// waitQueued waits until someone waits behind e's leader (Redis counts
// its fair waiters).
func waitQueued(t *testing.T, b driver.Inspector, e *leader.Election) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if li, err := b.Lock(t.Context(), e.Key()); err == nil && li.Waiters > 0 {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("the candidate never queued")
}

// TestLeaderKilled: the leader's process dies (SIGKILL, so nothing is
// released); a waiting candidate leads within the lease + 200 ms, with a
// higher term.
func TestLeaderKilled(t *testing.T) {
	const lease = time.Second
	r := newRedisEnv(t)
	name := "killed"
	a := startChild(t, r.childEnv(name, lease)...)
	termA := a.lead(t)

	bb, cb := r.client(t)
	e, err := leader.New(cb, name, leader.WithIdentity("b"), leader.WithLease(lease))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *leader.Term, 1)
	go func() {
		tb, err := e.Campaign(t.Context())
		if err != nil {
			t.Error(err)
		}
		got <- tb
	}()
	waitQueued(t, bb, e)
	killed := time.Now()
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	tb := <-got
	if tb == nil {
		return
	}
	took := time.Since(killed)
	defer tb.Resign(context.Background())
	t.Logf("new leader %v after SIGKILL (lease %v); terms %d → %d", took, lease, termA, tb.Token())
	if took > lease+200*time.Millisecond {
		t.Errorf("new leader after %v, want within the lease + 200 ms (%v)", took, lease+200*time.Millisecond)
	}
	if tb.Token() <= termA {
		t.Errorf("new term %d not above the killed leader's %d", tb.Token(), termA)
	}
}

// TestLeaderPaused: the leader's process is stopped (SIGSTOP) past its
// lease; another candidate is elected and writes with its term. When the
// old leader resumes, its term's context is already cancelled
// (lockx.ErrLost) when it next checks before a write: the local validity
// timer ran out during the pause. A write that raced the pause (made
// after the loss, as if in flight) is refused by the fence store.
func TestLeaderPaused(t *testing.T) {
	const lease = time.Second
	r := newRedisEnv(t)
	name, res := "paused", r.prefix+"resource"
	a := startChild(t, append(r.childEnv(name, lease), "LEADER_TEST_RESOURCE="+res)...)
	termA := a.lead(t)
	if l := a.next(t, 10*time.Second); l != fmt.Sprintf("WRITE %d ok", termA) {
		t.Fatalf("child's first write: %q", l)
	}
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()

	bb, cb := r.client(t)
	e, err := leader.New(cb, name, leader.WithIdentity("b"), leader.WithLease(lease))
	if err != nil {
		t.Fatal(err)
	}
	tb, err := e.Campaign(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Resign(context.Background())
	t.Logf("new leader %v after SIGSTOP (lease %v); terms %d → %d", time.Since(stopped), lease, termA, tb.Token())
	if tb.Token() <= termA {
		t.Fatalf("new term %d not above the paused leader's %d", tb.Token(), termA)
	}
	if err := bb.Fence(t.Context(), res, tb.Token()); err != nil {
		t.Fatal(err)
	}
	// Lines the child wrote before it stopped are read by now (its last
	// one at least a lease ago); drop them.
	for drained := false; !drained; {
		select {
		case <-a.lines:
		default:
			drained = true
		}
	}
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// The resumed leader's context must be cancelled before it writes
	// again; a write that raced the pause is refused by the fence store.
	for l := ""; !strings.HasPrefix(l, "LOST "); {
		l = a.next(t, 10*time.Second)
		t.Logf("resumed child: %s", l)
		switch {
		case strings.HasPrefix(l, "WRITE "):
			t.Errorf("the resumed leader wrote (%q) before its term's context was cancelled", l)
		case strings.HasPrefix(l, "LOST "):
			if !strings.Contains(l, lockx.ErrLost.Error()) || !strings.Contains(l, fmt.Sprintf("term %d", termA)) {
				t.Errorf("old leader's context cause %q, want lockx.ErrLost for term %d", l, termA)
			}
		default:
			t.Fatalf("unexpected line from the child: %q", l)
		}
	}
	if l := a.next(t, 10*time.Second); l != fmt.Sprintf("LATE %d stale", termA) {
		t.Errorf("the old leader's late write: %q, want it refused as stale", l)
	}
	if info, err := e.Leader(t.Context()); err != nil || info.Identity != "b" || info.Term != tb.Token() {
		t.Errorf("Leader after the old one resumed = %+v, %v; want b, term %d", info, err, tb.Token())
	}
}
