// Command holder is the fault suite's lock holder with the root module's
// backends (Redis, Sentinel, Cluster, Redlock, PostgreSQL, ZooKeeper,
// MySQL/MariaDB); see holderkit for its commands and output.
package main

import "github.com/lockx-go/lockx/faults/internal/holderkit"

func main() { holderkit.Main(nil) }
