package faults

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fuzzTarget is one go test -fuzz target of the module: bad input to key
// validation, token and header parsing and the decoders of backend replies
// reachable from outside the backend packages. Their seed corpora run as
// ordinary tests in every `go test`; TestFaultFuzz fuzzes each for a
// bounded time.
type fuzzTarget struct{ pkg, name string }

var fuzzTargets = []fuzzTarget{
	{"./lockx/", "FuzzKey"},
	{"./lockx/", "FuzzParseToken"},
	{"./lockx/", "FuzzOutcome"},
	{"./middleware/", "FuzzParseFencingHeaders"},
	{"./middleware/", "FuzzParseKey"},
	{"./internal/lockxd/", "FuzzServeHTTP"},
}

// fuzzTime is how long each target is fuzzed: LOCKX_FUZZTIME (a duration)
// if set, 60 s in the long form (LOCKX_FAULTS=long, make faults), else 0:
// the short form leaves fuzzing out so that `go test ./faults/` stays
// within its minute (each target's seed corpus still runs as a test).
func fuzzTime(t *testing.T) time.Duration {
	if s := os.Getenv("LOCKX_FUZZTIME"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			t.Fatalf("LOCKX_FUZZTIME=%q: want a positive duration", s)
		}
		return d
	}
	if long() {
		return 60 * time.Second
	}
	return 0
}

// TestFaultFuzz runs go test -fuzz for each target, one after another, in a
// child process. A crash fails the test with the fuzzer's output (the
// failing input is written to the package's testdata/fuzz for replay).
func TestFaultFuzz(t *testing.T) {
	per := fuzzTime(t)
	if per == 0 {
		t.Skip("fuzzing only with LOCKX_FAULTS=long (make faults) or LOCKX_FUZZTIME=5s; seed corpora run as ordinary tests")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i, ft := range fuzzTargets {
		d := per
		// Stay inside go test's -timeout: leave 30 s of slack per target
		// still to run, for building and the fuzzer's own wind-down.
		if dl, ok := t.Deadline(); ok {
			left := time.Until(dl) - time.Duration(len(fuzzTargets)-i)*30*time.Second
			if share := left / time.Duration(len(fuzzTargets)-i); share < d {
				d = share
			}
			if d < 2*time.Second {
				t.Fatalf("%s: no time left before the test deadline", ft.name)
			}
		}
		t.Run(ft.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), d+3*time.Minute)
			defer cancel()
			fuzz := func() ([]byte, error) {
				cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-fuzz", "^"+ft.name+"$",
					"-fuzztime", d.String(), "-parallel", "2", ft.pkg)
				cmd.Dir = root
				cmd.Env = append(os.Environ(), "LOCKX_FAULTS=")
				return cmd.CombinedOutput()
			}
			t0 := time.Now()
			out, err := fuzz()
			if err != nil && deadlineFlake(out) {
				// go.dev/issue/75804 (fixed in Go 1.27): the fuzz
				// coordinator can report its own -fuzztime deadline as a
				// failure of the target, with no failing input. Once.
				t.Logf("%s: Go's fuzztime-deadline race (go.dev/issue/75804), no failing input; running again", ft.name)
				out, err = fuzz()
			}
			if err != nil {
				t.Fatalf("go test -fuzz %s %s: %v\n%s", ft.name, ft.pkg, err, out)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			last := ""
			for _, l := range lines {
				if strings.HasPrefix(l, "fuzz: elapsed:") {
					last = l
				}
			}
			t.Logf("%s %s: %v fuzzing, %v in all; %s", ft.pkg, ft.name, d, time.Since(t0).Round(time.Second), last)
		})
	}
	t.Logf("fuzzing: %d targets in %v", len(fuzzTargets), time.Since(start).Round(time.Second))
}

// deadlineFlake reports whether a failed fuzzing run is Go's coordinator
// race at the -fuzztime deadline (go.dev/issue/75804) and nothing else: the
// target failed with only "context deadline exceeded", and no failing input
// was written, no panic or test error reported.
func deadlineFlake(out []byte) bool {
	o := string(out)
	if !strings.Contains(o, "context deadline exceeded") {
		return false
	}
	for _, real := range []string{"Failing input written", "panic:", "_test.go:", "fuzz: minimizing"} {
		if strings.Contains(o, real) {
			return false
		}
	}
	return true
}

func TestDeadlineFlake(t *testing.T) {
	flake := "fuzz: elapsed: 3s, execs: 279255 (0/sec), new interesting: 0 (total: 12)\n--- FAIL: FuzzParseToken (3.06s)\n    context deadline exceeded\nFAIL\nexit status 1\n"
	found := "--- FAIL: FuzzParseToken (0.10s)\n    --- FAIL: FuzzParseToken (0.00s)\n        token_test.go:40: round trip: got 1, want 2\n    Failing input written to testdata/fuzz/FuzzParseToken/abc\n"
	panicked := "--- FAIL: FuzzKey (0.10s)\n    context deadline exceeded\npanic: runtime error: index out of range\n"
	for _, c := range []struct {
		out  string
		want bool
	}{{flake, true}, {found, false}, {panicked, false}, {"FAIL\nexit status 1\n", false}} {
		if got := deadlineFlake([]byte(c.out)); got != c.want {
			t.Errorf("deadlineFlake(%q) = %v, want %v", c.out, got, c.want)
		}
	}
}
