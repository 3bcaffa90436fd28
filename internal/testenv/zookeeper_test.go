package testenv

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestStartZooKeeperLifecycle: a private server answers on its port in
// 7000-7899 with its own data directory, survives Stop/Restart with its
// data (a new pid), and is gone once stopped.
func TestStartZooKeeperLifecycle(t *testing.T) {
	z := StartZooKeeper(t)
	if z.Port < portMin || z.Port > portMax {
		t.Fatalf("port %d outside %d-%d", z.Port, portMin, portMax)
	}
	conf, err := fourLetter(z.Addr, "conf")
	if err != nil || !strings.Contains(conf, "dataDir="+filepath.Join(z.Dir, "data")) {
		t.Fatalf("conf = %q, %v; want our data directory", conf, err)
	}
	pid := z.Pid
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("pid %d: %v", pid, err)
	}
	z.Stop()
	if answers(z.Addr) {
		t.Fatal("server still answers after Stop")
	}
	z.Restart(t)
	if z.Pid == pid {
		t.Fatal("Restart kept the old pid")
	}
	if ok, err := fourLetter(z.Addr, "ruok"); err != nil || ok != "imok" {
		t.Fatalf("ruok after Restart = %q, %v", ok, err)
	}
	z.Kill()
	if err := syscall.Kill(z.Pid, 0); err == nil {
		t.Fatal("process alive after Kill")
	}
	z.Restart(t)
	if _, err := SharedZooKeeperAddr(); err != nil {
		t.Fatalf("SharedZooKeeperAddr: %v", err)
	}
	if a, _ := SharedZooKeeperAddr(); a == z.Addr {
		t.Fatal("the shared server is the private one")
	}
}
