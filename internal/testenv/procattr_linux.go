package testenv

import (
	"os/exec"
	"syscall"
)

// setProcAttr makes the kernel SIGKILL the child when the forking thread
// (and so the test binary) dies. Setpgid stays false: the child remains in
// the test's process group, so ^C in a terminal reaches it too.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: false}
}
