package testenv

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Crash tests need a process that really dies: SIGKILL leaves no deferred
// call, no Release, no watchdog goodbye — only what the servers see. The
// test binary plays that process itself: StartChild runs it again with
// $LOCKX_TEST_CHILD naming a role registered with Role, and Main runs the
// role instead of the tests.

const (
	childEnv     = "LOCKX_TEST_CHILD"
	childArgsEnv = "LOCKX_TEST_CHILD_ARGS"
)

var roles = map[string]func(args []string) error{}

// Role registers a child role under name, for StartChild. Call it from a
// package-level var of a test file (var _ = testenv.Role(...)), so that it is
// registered before Main runs. In the child, the role runs in place of the
// tests: it talks to the test through standard output (Say), and its
// process exits with status 0 when it returns nil, 1 otherwise.
func Role(name string, run func(args []string) error) struct{} {
	if _, dup := roles[name]; dup {
		panic("testenv: role " + name + " registered twice")
	}
	roles[name] = run
	return struct{}{}
}

// Say writes one line to the test that started this child; the test reads
// it with Child.Expect.
func Say(format string, args ...any) {
	fmt.Fprintf(os.Stdout, format+"\n", args...)
}

// runChild runs the role named in the environment, if any, and reports
// whether it did and with what exit status.
func runChild() (code int, isChild bool) {
	name := os.Getenv(childEnv)
	if name == "" {
		return 0, false
	}
	run, ok := roles[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "testenv: no child role %q in this binary\n", name)
		return 2, true
	}
	var args []string
	if err := json.Unmarshal([]byte(os.Getenv(childArgsEnv)), &args); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: child arguments: %v\n", err)
		return 2, true
	}
	if err := run(args); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: child role %s: %v\n", name, err)
		return 1, true
	}
	return 0, true
}

// Child is a copy of the test binary running a role.
type Child struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // of cmd.Wait, set before done is closed

	mu     sync.Mutex
	stderr strings.Builder
	lines  []string      // the child's standard output, line by line
	next   int           // the first line Expect has not looked at
	eof    bool          // no more lines
	more   chan struct{} // signalled (without blocking) when lines grow or eof is set
}

// StartChild starts this test binary again as the child role name with
// args. The child inherits the environment (service addresses). Its
// standard error is kept for failure messages. It is killed at the end of
// the test if it still runs, and on Linux also if the test binary dies.
func StartChild(t testing.TB, name string, args ...string) *Child {
	t.Helper()
	if _, ok := roles[name]; !ok {
		t.Fatalf("testenv: no child role %q registered", name)
	}
	a, err := json.Marshal(append([]string{}, args...))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+name, childArgsEnv+"="+string(a))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := &Child{name: name, cmd: cmd, done: make(chan struct{}), more: make(chan struct{}, 1)}
	cmd.Stderr = writerFunc(func(p []byte) (int, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.stderr.Len() < 64<<10 {
			c.stderr.Write(p)
		}
		return len(p), nil
	})
	if err := spawn(cmd); err != nil {
		t.Fatalf("testenv: starting child %s: %v", name, err)
	}
	go c.read(out)
	t.Cleanup(func() {
		c.kill()
		<-c.done
	})
	return c
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// read forwards the child's output lines, then reaps it.
func (c *Child) read(out io.Reader) {
	defer close(c.done)
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		c.mu.Lock()
		c.lines = append(c.lines, sc.Text())
		c.mu.Unlock()
		c.signal()
	}
	_, _ = io.Copy(io.Discard, out)
	c.mu.Lock()
	c.eof = true
	c.mu.Unlock()
	c.signal()
	c.err = c.cmd.Wait()
	spawnDone()
}

// Expect waits up to timeout for the child's next line that starts with
// prefix (earlier lines are skipped) and returns the rest of it, trimmed.
// It fails the test if the child ends or the time runs out first.
func (c *Child) Expect(t testing.TB, prefix string, timeout time.Duration) string {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		for c.next < len(c.lines) {
			line := c.lines[c.next]
			c.next++
			if rest, found := strings.CutPrefix(line, prefix); found {
				c.mu.Unlock()
				return strings.TrimSpace(rest)
			}
		}
		eof := c.eof
		c.mu.Unlock()
		if eof {
			<-c.done
			t.Fatalf("testenv: child %s ended (%v) before saying %q; its stderr:\n%s", c.name, c.err, prefix, c.Stderr())
		}
		select {
		case <-c.more:
		case <-deadline.C:
			t.Fatalf("testenv: child %s did not say %q within %v; its stderr:\n%s", c.name, prefix, timeout, c.Stderr())
		}
	}
}

// Kill sends the child SIGKILL and waits until it is reaped. The child gets
// no chance to clean up: its connections are cut by the kernel.
func (c *Child) Kill(t testing.TB) {
	t.Helper()
	c.kill()
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("testenv: child %s not reaped 10 s after SIGKILL", c.name)
	}
	if ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && !(ws.Signaled() && ws.Signal() == syscall.SIGKILL) {
		t.Fatalf("testenv: child %s ended on its own (%v) before it was killed; its stderr:\n%s", c.name, c.err, c.Stderr())
	}
}

// Wait waits up to timeout for the child to exit on its own and returns its
// exit error (nil for status 0).
func (c *Child) Wait(t testing.TB, timeout time.Duration) error {
	t.Helper()
	select {
	case <-c.done:
		return c.err
	case <-time.After(timeout):
		t.Fatalf("testenv: child %s still runs after %v; its stderr:\n%s", c.name, timeout, c.Stderr())
		return nil
	}
}

func (c *Child) signal() {
	select {
	case c.more <- struct{}{}:
	default:
	}
}

func (c *Child) kill() {
	select {
	case <-c.done:
	default:
		_ = c.cmd.Process.Signal(syscall.SIGKILL)
	}
}

// Output returns every line the child has written to standard output so
// far.
func (c *Child) Output() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.lines...)
}

// Stderr returns what the child wrote to standard error so far (the first
// 64 KiB).
func (c *Child) Stderr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.String()
}
