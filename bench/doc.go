// Package bench measures lockx side by side with its peers and with the
// physical limit of the store underneath: raw go-redis commands and raw
// PostgreSQL advisory locks.
//
// The cases live in files by theme (uncontended.go, hotkey.go, memory.go,
// pg.go); report.go turns the samples into the tables of
// docs/benchmarks.md. The command lockxbench (cmd/lockxbench, run by
// `make bench`) starts its own redis-server, uses the local PostgreSQL and
// runs every case for a fixed duration after a warm-up, several times, so
// that each ratio compares two rows of the same run.
//
// The package has its own go.mod so that the peers (redsync,
// bsm/redislock) and the plotting library never enter the dependencies of
// the lockx module.
package bench
