package faults

import "golang.org/x/sys/unix"

// Now returns CLOCK_MONOTONIC in nanoseconds: one clock for the test
// process and every holder process, so their operations can be ordered in
// one history.
func Now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return ts.Nano()
}
