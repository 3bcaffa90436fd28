package main

import (
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/lockx-go/lockx/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// want is what the quick start prints, whatever the backend's tokens.
var want = regexp.MustCompile(`^shipping order 42 under fencing token (\d+)
holding order:42, token (\d+)
a second taker is refused: lockx: acquire "order:42": lock not acquired
released
$`)

// TestQuickStart runs the README's program as `go run ./examples/quickstart`
// does, on the in-process backend and on Redis, and checks what it prints:
// the README's quick start can never go stale without failing here.
func TestQuickStart(t *testing.T) {
	t.Setenv("LOCKX_REDIS_URL", "")
	check(t, "memlock", stdoutOf(t, main))
	t.Setenv("LOCKX_REDIS_URL", "redis://"+testenv.RedisAddr(t)+"/0")
	check(t, "redis", stdoutOf(t, main))
}

func check(t *testing.T, backend, out string) {
	t.Helper()
	m := want.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("%s: the quick start printed\n%s", backend, out)
	}
	first, _ := strconv.ParseUint(m[1], 10, 64)
	second, _ := strconv.ParseUint(m[2], 10, 64)
	if second <= first {
		t.Errorf("%s: the second token %s is not above the first %s", backend, m[2], m[1])
	}
}

// stdoutOf runs f and returns what it wrote to os.Stdout.
func stdoutOf(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	orig := os.Stdout
	os.Stdout = w
	read := make(chan string, 1)
	go func() { b, _ := io.ReadAll(r); read <- string(b) }()
	defer func() { os.Stdout = orig }()
	f()
	_ = w.Close()
	out := <-read
	_ = r.Close()
	return out
}

// TestREADME checks that the README's quick start is this program, from
// `package main` on, and that what the README says it prints is what it
// prints on the in-process backend.
func TestREADME(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	prog := string(src)
	prog = prog[strings.Index(prog, "package main"):]
	text := string(readme)
	if !strings.Contains(text, "```go\n"+prog+"```\n") {
		t.Error("README.md's quick start is not examples/quickstart/main.go from `package main` on: copy it over")
	}
	t.Setenv("LOCKX_REDIS_URL", "")
	if out := stdoutOf(t, main); !strings.Contains(text, "It prints:\n\n```\n"+out+"```\n") {
		t.Errorf("README.md does not show what the quick start prints:\n%s", out)
	}
}
