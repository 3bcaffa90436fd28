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
			cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-fuzz", "^"+ft.name+"$",
				"-fuzztime", d.String(), "-parallel", "2", ft.pkg)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "LOCKX_FAULTS=")
			t0 := time.Now()
			out, err := cmd.CombinedOutput()
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
