package testenv

import (
	"os/exec"
	"runtime"
	"sync"
)

// Child processes are started from one goroutine locked to its OS thread.
//
// On Linux every child gets Pdeathsig=SIGKILL, so the kernel kills it when
// the thread that forked it dies — which includes the whole test binary
// dying from a panic, a test timeout or SIGKILL, when no deferred stop can
// run. Pdeathsig follows the forking *thread*, not the process, and the Go
// runtime discards a thread whenever a goroutine exits while locked to it
// (a common trick after setns in network-namespace tests). Forking from a
// dedicated locked thread keeps children alive exactly as long as we want:
// the loop below only returns, discarding its thread, once every child it
// started has been reaped.

type spawnReq struct {
	cmd  *exec.Cmd
	errc chan error
}

var spawner struct {
	mu   sync.Mutex
	reqs chan spawnReq // nil while no spawn loop runs
	live int           // started children not yet reaped, plus starts in flight
}

// spawn starts cmd from the spawner thread. When it returns nil, the caller
// must call spawnDone once the process has been reaped (after cmd.Wait).
func spawn(cmd *exec.Cmd) error {
	setProcAttr(cmd)
	spawner.mu.Lock()
	if spawner.reqs == nil {
		spawner.reqs = make(chan spawnReq)
		go spawnLoop(spawner.reqs)
	}
	spawner.live++
	reqs := spawner.reqs
	spawner.mu.Unlock()

	errc := make(chan error, 1)
	reqs <- spawnReq{cmd: cmd, errc: errc}
	if err := <-errc; err != nil {
		spawnDone()
		return err
	}
	return nil
}

// spawnDone records that a child has been reaped; the last one ends the
// spawn loop so that no testenv goroutine outlives the servers.
func spawnDone() {
	spawner.mu.Lock()
	defer spawner.mu.Unlock()
	spawner.live--
	if spawner.live == 0 {
		close(spawner.reqs)
		spawner.reqs = nil
	}
}

func spawnLoop(reqs <-chan spawnReq) {
	// Deliberately never unlocked: when the loop ends, the goroutine exits
	// locked and the runtime throws the thread away. No child started from
	// it is alive by then.
	runtime.LockOSThread()
	for r := range reqs {
		r.errc <- r.cmd.Start()
	}
}
