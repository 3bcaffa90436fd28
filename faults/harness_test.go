package faults

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lockx-go/lockx/internal/testenv"
	"github.com/lockx-go/lockx/lockx/pglock"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// long reports whether the long form runs (LOCKX_FAULTS=long, make faults).
func long() bool { return os.Getenv("LOCKX_FAULTS") == "long" }

// event mirrors the holder's output (faults/internal/holderkit.Event).
type event struct {
	Ev      string `json:"ev"`
	Client  int    `json:"client"`
	Release bool   `json:"release"`
	Reg     string `json:"reg"`
	Write   bool   `json:"write"`
	Val     int64  `json:"val"`
	Token   uint64 `json:"token"`
	OK      bool   `json:"ok"`
	Unknown bool   `json:"unknown"`
	Held    bool   `json:"held"`
	Call    int64  `json:"call"`
	Ret     int64  `json:"ret"`
	Err     string `json:"err"`
}

// binaries are the programs a test's holders and servers run: the holder
// with the root module's backends, built at once, and the etcd program
// (faults/etcd, a module of its own: an etcd server and a holder with
// etcdlock), built the first time an etcd scenario runs.
type binaries struct {
	dir    string
	holder string

	etcdOnce sync.Once
	etcd     string
	etcdErr  error
}

// newBinaries builds the holder into a directory of t's.
func newBinaries(t *testing.T) *binaries {
	t.Helper()
	b := &binaries{dir: t.TempDir()}
	var err error
	if b.holder, err = goBuild(b.dir, "holder", ".", "./internal/holder"); err != nil {
		t.Fatal(err)
	}
	return b
}

// etcdProgram builds faults/etcd once and returns its path.
func (b *binaries) etcdProgram(t *testing.T) string {
	t.Helper()
	b.etcdOnce.Do(func() { b.etcd, b.etcdErr = goBuild(b.dir, "etcd", "etcd", ".") })
	if b.etcdErr != nil {
		t.Fatal(b.etcdErr)
	}
	return b.etcd
}

// goBuild compiles pkg of the module in the directory src into dir/name.
func goBuild(dir, name, src, pkg string) (string, error) {
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s in %s: %v\n%s", pkg, src, err, out)
	}
	return bin, nil
}

// holder is one holder process.
type holder struct {
	t     *testing.T
	id    int
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{} // closed when stdout is drained

	mu      sync.Mutex
	events  []event
	cursor  map[string]int
	changed chan struct{}
}

func startHolder(t *testing.T, bin string, id int, args ...string) *holder {
	t.Helper()
	cmd := exec.Command(bin, append([]string{fmt.Sprint("-id=", id)}, args...)...)
	cmd.Stderr = &prefixWriter{t: t, prefix: fmt.Sprintf("holder %d: ", id)}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &holder{t: t, id: id, cmd: cmd, stdin: stdin, done: make(chan struct{}),
		cursor: map[string]int{}, changed: make(chan struct{})}
	go func() {
		defer close(h.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var e event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				continue
			}
			h.mu.Lock()
			h.events = append(h.events, e)
			close(h.changed)
			h.changed = make(chan struct{})
			h.mu.Unlock()
		}
	}()
	t.Cleanup(h.kill)
	return h
}

// kill ends the process (by its pid) if it is still running and waits for it.
func (h *holder) kill() {
	if h.cmd.ProcessState == nil {
		_ = h.cmd.Process.Signal(syscall.SIGCONT)
		_ = h.cmd.Process.Kill()
		<-h.done
		_ = h.cmd.Wait()
	}
}

func (h *holder) send(cmd string) {
	h.t.Helper()
	if _, err := io.WriteString(h.stdin, cmd+"\n"); err != nil {
		h.t.Fatalf("holder %d: %s: %v", h.id, cmd, err)
	}
}

// next waits for the holder's next event of kind ev not yet returned.
func (h *holder) next(ev string, timeout time.Duration) (event, bool) {
	deadline := time.After(timeout)
	for {
		h.mu.Lock()
		for i := h.cursor[ev]; i < len(h.events); i++ {
			if h.events[i].Ev == ev {
				h.cursor[ev] = i + 1
				e := h.events[i]
				h.mu.Unlock()
				return e, true
			}
			if h.events[i].Ev == "error" {
				h.t.Errorf("holder %d: %s", h.id, h.events[i].Err)
			}
		}
		h.cursor[ev] = len(h.events)
		ch := h.changed
		h.mu.Unlock()
		select {
		case <-ch:
		case <-h.done:
			h.mu.Lock()
			n := len(h.events)
			h.mu.Unlock()
			if h.cursor[ev] >= n {
				return event{}, false
			}
		case <-deadline:
			return event{}, false
		}
	}
}

// must is next that fails the test on a timeout.
func (h *holder) must(ev string, timeout time.Duration) event {
	h.t.Helper()
	e, ok := h.next(ev, timeout)
	if !ok {
		h.t.Fatalf("holder %d: no %q event within %v", h.id, ev, timeout)
	}
	return e
}

// acquire asks for the lock and returns the holder's answer.
func (h *holder) acquire(wait time.Duration) event {
	h.t.Helper()
	h.send(fmt.Sprintf("acquire %d", wait.Milliseconds()))
	return h.must("lock", wait+15*time.Second)
}

// write runs a read-modify-write on both registers and returns once the
// holder reports it done.
func (h *holder) write() {
	h.t.Helper()
	h.send("write")
	h.must("wrote", 60*time.Second)
}

func (h *holder) release() { h.send("release"); h.must("lock", 20*time.Second) }

func (h *holder) check() bool { h.send("check"); return h.must("check", 10*time.Second).Held }

// quit asks the holder to exit and waits for it.
func (h *holder) quit() {
	h.send("quit")
	select {
	case <-h.done:
	case <-time.After(15 * time.Second):
		h.t.Errorf("holder %d did not exit", h.id)
		_ = h.cmd.Process.Kill()
		<-h.done
	}
	_ = h.cmd.Wait()
}

func (h *holder) signal(sig syscall.Signal) {
	h.t.Helper()
	if err := h.cmd.Process.Signal(sig); err != nil {
		h.t.Fatalf("holder %d: %v: %v", h.id, sig, err)
	}
}

func (h *holder) all() []event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]event(nil), h.events...)
}

func (h *holder) lostAt() (int64, bool) {
	for _, e := range h.all() {
		if e.Ev == "lost" {
			return e.Call, true
		}
	}
	return 0, false
}

type prefixWriter struct {
	t      *testing.T
	prefix string
}

func (w *prefixWriter) Write(p []byte) (int, error) {
	for _, l := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		w.t.Log(w.prefix + l)
	}
	return len(p), nil
}

// registers opens the register database and creates the register table
// and pglock's fence table.
func registers(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	url := testenv.PostgresURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if err := pglock.MigrateFences(ctx, pool); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS faults_register (id text PRIMARY KEY, val bigint NOT NULL, tok bigint NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return pool, url
}

func newRegister(t *testing.T, pool *pgxpool.Pool, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := pool.Exec(ctx, `INSERT INTO faults_register (id, val, tok) VALUES ($1, 0, 0)`, id); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = pool.Exec(ctx, `DELETE FROM faults_register WHERE id = $1`, id)
		_, _ = pool.Exec(ctx, `DELETE FROM lockx.lockx_fences WHERE resource = $1`, []byte(id))
	})
}
