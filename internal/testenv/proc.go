package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// proc is the process that every server testenv starts is run by —
// redis-server, ZooKeeper, MariaDB, etcd, PgBouncer: the command and its
// reaping, the ports the server holds, and the Stop, Kill, Restart and
// retirement they share. A server type embeds it and sets what, addr, the
// ports it reserved, pid (its exported Pid) and start, which (re)starts
// the process with mu held, through launchLocked and awaitLocked, and
// reports errPortTaken if another process owns the port.
type proc struct {
	what  string       // the server's name in messages ("redis-server")
	addr  string       // where it listens, for messages
	ports []int        // reserved ports, released when it retires
	pid   *int         // where launchLocked records the process id
	log   string       // the server's log file, quoted in errors
	start func() error // start (again) and wait until it serves; mu held

	mu    sync.Mutex
	cmd   *exec.Cmd       // nil when not running
	done  <-chan struct{} // closed once cmd has been reaped
	freed bool            // ports released, server retired
}

// init says which server p runs (see proc).
func (p *proc) init(what, addr string, ports []int, pid *int, log string, start func() error) {
	p.what, p.addr, p.ports, p.pid, p.log, p.start = what, addr, ports, pid, log, start
}

// first starts the server for the first time (start, under mu).
func (p *proc) first() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.start()
}

// Stop shuts the server down: SIGTERM to its pid, then SIGKILL if it has
// not exited within 5 s. It returns once the process has been reaped and
// does nothing if the server is not running. Restart may follow.
func (p *proc) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopLocked(syscall.SIGTERM)
}

// Kill crashes the server: SIGKILL to its pid, returning once the process
// has been reaped. Restart brings it back on the same ports and data.
func (p *proc) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopLocked(syscall.SIGKILL)
}

// Restart starts the server again with the same ports, directory and
// arguments (stopping it first if it is still running) and waits until it
// serves. It fails tb if the port has been taken in the meantime or the
// server does not come up.
func (p *proc) Restart(tb testing.TB) {
	tb.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.freed {
		tb.Fatalf("testenv: Restart of %s on %s after its test ended", p.what, p.addr)
	}
	if err := restartLocked(p.stopLocked, p.start); err != nil {
		tb.Fatalf("testenv: restarting %s on %s: %v", p.what, p.addr, err)
	}
}

// Running reports whether the server process is alive (started and not
// yet reaped).
func (p *proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// retire stops the server for good and gives its ports back.
func (p *proc) retire() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopLocked(syscall.SIGTERM)
	if !p.freed {
		p.freed = true
		for _, port := range p.ports {
			releasePort(port)
		}
	}
}

func (p *proc) stopLocked(sig syscall.Signal) {
	if p.cmd == nil {
		return
	}
	stopProcess(p.cmd, p.done, sig)
	p.cmd = nil
}

// launchLocked spawns cmd as the server's process without waiting for it
// to serve.
func (p *proc) launchLocked(cmd *exec.Cmd) error {
	done, err := startProcess(cmd)
	if err != nil {
		return fmt.Errorf("starting %s: %w", p.what, err)
	}
	p.cmd, p.done = cmd, done
	if p.pid != nil {
		*p.pid = cmd.Process.Pid
	}
	return nil
}

// awaitLocked waits, polling ready every 'every', until the launched
// process serves (ready returns nil). ready reports errPortTaken when
// another process answers on the port: the launched one is killed. If the
// process exits first, exited says why (errPortTaken if it could not bind);
// if timeout passes first, it is killed and the last answer of ready
// returned.
func (p *proc) awaitLocked(timeout, every time.Duration, ready func() error, exited func(*os.ProcessState) error) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-p.done:
			st := p.cmd.ProcessState
			p.cmd = nil
			return exited(st)
		default:
		}
		err := ready()
		switch {
		case err == nil:
			return nil
		case errors.Is(err, errPortTaken):
			p.stopLocked(syscall.SIGKILL)
			return err
		case time.Now().After(deadline):
			p.stopLocked(syscall.SIGKILL)
			return fmt.Errorf("%s on %s does not serve after %v (%v); %s:\n%s", p.what, p.addr, timeout, err, p.log, tail(p.log))
		}
		time.Sleep(every)
	}
}

// onFreePort runs try with freshly reserved ports (n of them; with
// cluster, the first one's cluster bus port free too) until it succeeds or
// fails otherwise than with errPortTaken, ten times at most. Ports of a
// failed try are released; a successful try owns them.
func onFreePort(what string, n int, cluster bool, try func(ports []int) error) error {
	var lastErr error
	for attempt := 0; attempt < 10; attempt++ {
		ports := make([]int, 0, n)
		var err error
		for i := 0; i < n && err == nil; i++ {
			var port int
			if port, err = reservePort(cluster && i == 0); err == nil {
				ports = append(ports, port)
			}
		}
		if err == nil {
			err = try(ports)
		}
		if err == nil {
			return nil
		}
		for _, port := range ports {
			releasePort(port)
		}
		if !errors.Is(err, errPortTaken) {
			return err
		}
		lastErr = err
	}
	return fmt.Errorf("no free port for %s in %d-%d: %w", what, portMin, portMax, lastErr)
}
