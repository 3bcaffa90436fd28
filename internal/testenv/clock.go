package testenv

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/lockx-go/lockx/internal/wallclock"
)

// ClockOffsetEnv names the variable that moves the wall clock of a test
// binary: "+400d", "-30d" (whole days) or a Go duration ("9600h"). Main
// applies it to wallclock.Now before any test runs, so that the packages'
// default clocks (cronguard's instance clock, memlock's, cmd/lockx's) read
// the shifted time while the tests' fixed instants stay where they were: a
// test that only passes near the day it was written fails at once, not a
// year later. External stores (Redis TIME, PostgreSQL now()) keep their
// own clocks. Production code never reads the variable: only Main, which
// needs the *testing.M that only go test makes, does.
const ClockOffsetEnv = "LOCKX_TEST_CLOCK_OFFSET"

// ClockOffset returns the offset ClockOffsetEnv asks for (0 if unset).
func ClockOffset() (time.Duration, error) {
	v := os.Getenv(ClockOffsetEnv)
	if v == "" {
		return 0, nil
	}
	d, err := parseOffset(v)
	if err != nil {
		return 0, fmt.Errorf("testenv: %s=%q: %w", ClockOffsetEnv, v, err)
	}
	return d, nil
}

// maxDays keeps a shifted clock well inside the range time.Time.UnixNano
// represents (1678-2262) and the offset inside a time.Duration.
const maxDays = 100 * 365

func parseOffset(v string) (time.Duration, error) {
	const want = `want whole days ("+400d") or a Go duration ("9600h")`
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil {
			return 0, errors.New(want)
		}
		if n > maxDays || n < -maxDays {
			return 0, fmt.Errorf("more than %d days", maxDays)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, errors.New(want)
	}
	if d > maxDays*24*time.Hour || d < -maxDays*24*time.Hour {
		return 0, fmt.Errorf("more than %d days", maxDays)
	}
	return d, nil
}

// moveClock applies ClockOffsetEnv to wallclock.Now and says so on stderr:
// a run that silently ignored the offset would prove nothing, so a
// malformed value is an error that stops the binary.
func moveClock() error {
	d, err := ClockOffset()
	if err != nil || d == 0 {
		return err
	}
	wallclock.Now = func() time.Time { return time.Now().Add(d) }
	fmt.Fprintf(os.Stderr, "testenv: %s=%s: the packages' wall clock reads %s\n",
		ClockOffsetEnv, os.Getenv(ClockOffsetEnv), wallclock.Now().UTC().Format(time.RFC3339))
	return nil
}
