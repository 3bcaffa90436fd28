// Package wallclock is the wall clock that lockx's date-sensitive defaults
// read: the instance clock cronguard names triggers by, the one its
// BackendStore lists recent runs around, the lockx CLI's. It is time.Now
// in every program; only internal/testenv moves it, in test binaries, so that
// the suite can run as if the machine's clock stood a year or more ahead
// (LOCKX_TEST_CLOCK_OFFSET; see docs/testing.md, "The moved clock").
package wallclock

import "time"

// Now returns the current time. Only internal/testenv assigns it, from
// testenv.Main, before any test runs (TestOnlyTestenvMovesTheClock checks
// that no other file does).
var Now = time.Now
