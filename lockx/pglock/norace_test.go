//go:build !race

package pglock_test

const raceEnabled = false
