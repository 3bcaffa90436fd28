//go:build !linux

package testenv

import "os/exec"

// setProcAttr has nothing to add outside Linux: children are stopped by
// Main and t.Cleanup only.
func setProcAttr(cmd *exec.Cmd) {}
