package faults

import (
	"fmt"
	"strings"
	"testing"
)

// brokenWhat describes a sensitivity case's broken holder for the report.
func brokenWhat(a, b string) string {
	switch {
	case a == "short":
		return "A's lease half as long as reported"
	case b == "ignore":
		return "B's lock ignores its holder (another key)"
	}
	return a + b
}

// TestFaultLockSensitivity (in a file named to run before TestFault, which
// writes the report its rows go into) runs scenarios with a deliberately broken lock
// (the holder's -broken flag) and requires the lock-level checks to fail
// them, as the unfenced twin shows the register checks can fail:
//
//   - a lease that ends early (A's server-side lease half what it asked
//     for): B's grant after a pause comes before A's lease could have
//     expired;
//   - a lock that ignores its holder (B takes another key): B is granted
//     at once, whether the fault outlasts the lease (too early) or not (a
//     second grant, and a lock history the fenced-mutex model rejects).
func TestFaultLockSensitivity(t *testing.T) {
	bins := newBinaries(t)
	pool, url := registers(t)
	byName := map[string]*scenario{}
	for _, sc := range scenarios() {
		byName[sc.name] = sc
	}
	cases := []struct {
		scenario, brokenA, brokenB string
		want                       []string // substrings of the expected problems
	}{
		{"holder-pause", "short", "", []string{"before A's lease could have expired"}},
		{"holder-pause", "", "ignore", []string{"before A's lease could have expired"}},
		{"redlock-one-node-killed", "", "ignore", []string{"during a fault shorter than the lease", "fenced-mutex model"}},
		{"mysql-table-holder-pause", "short", "", []string{"before A's lease could have expired"}},
		{"mysql-table-session-killed", "", "ignore", []string{"during a fault shorter than the lease", "fenced-mutex model"}},
		{"etcd-holder-pause", "short", "", []string{"before A's lease could have expired"}},
		{"etcd-leader-killed", "", "ignore", []string{"during a fault shorter than the lease", "fenced-mutex model"}},
	}
	for _, c := range cases {
		sc := *byName[c.scenario]
		sc.brokenA, sc.brokenB = c.brokenA, c.brokenB
		t.Run(sc.name+"/broken-"+c.brokenA+c.brokenB, func(t *testing.T) {
			res := &result{Name: sc.name}
			for attempt := 0; res.Runs < 1; attempt++ {
				if attempt == 4 {
					t.Fatalf("no run got as far as the fault in %d attempts", attempt)
				}
				driveOnce(t, &sc, bins, pool, url, res)
				if t.Failed() {
					return
				}
			}
			problems := lockProblems(&sc, res)
			t.Logf("lock-level checks on a broken lock: %q", problems)
			noteReport(&brokenNotes, fmt.Sprintf("| %s | %s | %s |", sc.name, brokenWhat(c.brokenA, c.brokenB), strings.Join(problems, "; ")))
			all := strings.Join(problems, "\n")
			for _, w := range c.want {
				if !strings.Contains(all, w) {
					t.Errorf("the checks missed the broken lock: no problem mentions %q (got %q)", w, problems)
				}
			}
		})
	}
}
