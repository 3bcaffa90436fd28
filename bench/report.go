package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// col is one metric column of a table.
type col struct {
	key, header string
	spread      bool // show min–max across runs beside the median
}

// section is one table of the report.
type section struct {
	key, title, intro string
	cols              []col
	ratio             string // metric divided by the group's baseline, per run
	ratioHeader       string
}

var (
	colRate  = func(h string) col { return col{mRate, h, true} }
	colP50   = col{mP50, "p50 ms", false}
	colP99   = col{mP99, "p99 ms", true}
	colFail  = col{mFails, "failed", false}
	colCmds  = func(h string) col { return col{mCmds, h, false} }
	colRTT   = func(h string) col { return col{mRTT, h, false} }
	colViol  = col{mViol, "overlaps", false}
	waitCols = []col{
		colRate("handoffs/s"), {mP50, "wait p50 ms", false}, {mP99, "wait p99 ms", true},
		{mMax, "wait max ms", false}, {mFails, "failed calls", false}, colRTT("round trips/handoff"), colCmds("server cmds/handoff"), colViol,
	}
)

// sections lists the tables in report order.
var sections = []section{
	{
		key:   scalingSection,
		title: "Uncontended acquire + release, a distinct key per goroutine, watchdog off",
		intro: "One process, one go-redis client (pool 64) shared by the goroutines; each goroutine acquires and releases its own key in a loop with the library's plain lock call and its defaults (lockx with WithLease, so no watchdog). Latency is the whole pair. Round trips are counted in the clients (a go-redis hook: one per command sent alone, one per pipeline, so a pipeline that carries the calls of many goroutines, as lockx's batching does, counts once for all of them: the figure is amortised, and each pair still waits for its acquire and then its release); server cmds counts every command the server executed (INFO commandstats, including the commands a script calls).",
		cols:  []col{colRate("pairs/s"), colP50, colP99, colRTT("round trips/pair"), colCmds("server cmds/pair"), colFail},
		ratio: mRate, ratioHeader: "× raw (per run)",
	},
	{
		key:   batchSection,
		title: "Batching: lockx against rueidislock and with batching off",
		intro: "As the uncontended table (one process, a distinct key per goroutine, lockx with WithLease), with rueidislock, whose client pipelines every concurrent command over one connection (KeyMajority 1: one Redis key per lock, as lockx; it renews every lock in the background, as it always does; its own round trips are not counted), lockx with redislock.WithAutoPipeline(false): every call its own round trip on a pooled connection, and the redislock Backend driven directly (a fresh owner, Backend.Acquire, Backend.Release; no Client): what the scripts and the batcher cost alone, so the gap to the Client row is the Client's bookkeeping.",
		cols:  []col{colRate("pairs/s"), colP50, colP99, colRTT("round trips/pair"), colCmds("server cmds/pair"), colFail},
		ratio: mRate, ratioHeader: "× raw (per run)",
	},
	{
		key:   pairedSection,
		title: "Paired latencies: two operations alternately on each goroutine",
		intro: "Each goroutine (one, unless the group says four) runs operation a, then b, then a …, timing each, so that whatever else loads the machine falls on both alike; a and b are their median and mean latencies, b/a the ratio of the medians (per run; the median, because on a loaded machine a few calls preempted for milliseconds move a mean). Batching: the same acquire + release pair through a batched and an unbatched redislock Backend on one go-redis client. AcquireMany: Client.Acquire of one key against Client.AcquireMany of 10 keys (both WithLease; the time to acquire only, each released after it is timed and followed by a 200 µs pause on both sides, so that the set's concurrent releases have settled before the next timed acquire); key by key hides the backend's ManyAcquirer, so the Client takes the keys one after the other. The Backend row times the same calls on the redislock Backend without the Client (no holds, no lease timers). The floor row runs no lockx code: one minimal all-or-nothing script (MGET of the keys, then SET … PX of each; no token, no queue) on 1 key against the same script on 10 keys, timed and paused alike — the share of the ratio that is Redis's own per-key work. The rows 'lockx Acquire + Release vs a peer, alternately' (1 and 4 goroutines) run a peer's uncontended pair (a, its own go-redis client) and lockx's (b, WithLease, its own client) on each goroutine's own keys: at a fixed number of callers a closed loop's pairs/s is the inverse of its mean pair latency, so a mean / b mean is lockx's rate relative to the peer's, free of the drift between rows measured seconds apart (issue 31's 1- and 4-goroutine targets are judged on it).",
		cols:  []col{{mPairA, "a p50 µs", true}, {mPairB, "b p50 µs", true}, {mPairRatio, "b/a (p50)", true}, {mPairA + " mean", "a mean µs", false}, {mPairB + " mean", "b mean µs", false}, colFail},
	},
	{
		key:   allocSection,
		title: "Allocations per uncontended pair",
		intro: "testing.Benchmark inside the command with ReportAllocs (what `go test -benchmem` reports), one goroutine, one key; every allocation of the process during the loop counts, including the library's background goroutines.",
		cols:  []col{{"allocs/op", "allocs/pair", false}, {"B/op", "bytes/pair", false}, {"ns/op", "ns/pair", false}},
		ratio: "allocs/op", ratioHeader: "allocs × raw",
	},
	{
		key:   hotSection,
		title: "One hot key, 16 independent clients",
		intro: "16 goroutines, each with its own go-redis client (default pool) and its own library client, as 16 processes would be; each locks the key, releases it at once and locks again. A handoff is a grant to a different client than the previous holder; its wait runs from that client's first try (across failed calls) to the grant. Failed calls are lock calls that gave up (retries exhausted); the client then tries again. Overlaps counts grants while another client still held the lock (must be 0). The floor row is no lock at all: one token in a Redis list, taken with BLPOP and given back with LPUSH by the same 16 clients, so each handoff is one round trip of the giver and the reply Redis pushes to the next blocked taker — the physical limit of a handoff through this server on this machine, measured in the same run.",
		cols:  waitCols,
		ratio: mRate, ratioHeader: "× raw (per run)",
	},
	{
		key:   localSection,
		title: "Local lock first: 16 goroutines of one process on one hot key",
		intro: "One lockx Client (pool 64) shared by 16 goroutines, next to one rueidislock Locker shared the same way (the baseline); a handoff is a grant to a different goroutine. With LocalFirst the goroutines queue in-process and only one of them contends in Redis.",
		cols:  waitCols,
		ratio: mRate, ratioHeader: "× rueidislock (per run)",
	},
	{
		key:   zipfSection,
		title: "1,000 keys × 64 goroutines, Zipf popularity (s = 1.1)",
		intro: "One process (pool 64); each goroutine draws a key (the most popular gets ~18 % of draws, the top ten ~48 %), locks it, releases it at once. Wait is from the first try to the grant. Peers at their best retry setting, redsync also at its defaults.",
		cols: []col{colRate("acquisitions/s"), {mP50, "wait p50 ms", false}, {mP99, "wait p99 ms", true},
			{mMax, "wait max ms", false}, {mFails, "failed calls", false}, colRTT("round trips/acquisition")},
		ratio: mRate, ratioHeader: "× raw (per run)",
	},
	{
		key:   watchdogSection,
		title: "Watchdog overhead: 10,000 held locks, idle",
		intro: fmt.Sprintf("One lockx Client holds 10,000 locks; the window is idle but for renewals. With WithWatchdog(%v) every lock is renewed every %v, so the watchdog owes %v renewals/s (at the default 30 s lease a tenth of it). Round trips/s are counted in the client (go-redis hook), server commands/s from INFO commandstats (including the commands the renewal script calls per key), CPU in %% of one core from getrusage (this process) and INFO cpu (redis-server). Lost must be 0.", watchdogLease, watchdogLease/3, watchdogLocks/(watchdogLease/3).Seconds()),
		cols:  []col{{"renewals/s owed", "renewals/s owed", false}, {"rtt/s", "round trips/s", true}, {"cmds/s", "server cmds/s", true}, {"client cpu%", "client CPU %", true}, {"redis cpu%", "redis CPU %", true}, {"lost", "lost", false}},
	},
	{
		key:   memSection,
		title: "Redis memory per held lock",
		intro: "Redis's data memory (INFO memory used_memory less mem_clients_normal, the connections' query and output buffers, which follow how commands are batched and not the keys held) while holding 100,000 locks, less the same reading once they are released and the keyspace flushed (same connections; every case pays for its hash-table buckets), with keys order:N, each library naming them its way (lockx adds its default prefix, lockx:{order:N}), divided by the locks; everything the library keeps in Redis per lock, including lockx's fence state. The second raw row uses lockx's key names, to separate the cost of the longer name from the cost of the data structure. Measured in the first run only (it does not vary).",
		cols:  []col{{"bytes/lock", "bytes/lock", false}, {"keys/lock", "Redis keys/lock", false}},
		ratio: "bytes/lock", ratioHeader: "× raw",
	},
	{
		key:   heldSection,
		title: "Scaling with held locks: 16 goroutines of uncontended pairs while N locks are held",
		intro: "The same Locker first holds N locks (watchdog off), then runs uncontended pairs at 16 goroutines; bytes/lock is the Redis memory of the N held locks.",
		cols:  []col{colRate("pairs/s"), colP99, {"bytes/lock", "bytes/held lock", false}, colRTT("round trips/pair")},
		ratio: mRate, ratioHeader: "× raw (per run)",
	},
	{
		key:   redlockSection,
		title: "Redlock: 5 independent redis-servers",
		intro: "Both libraries on the same five servers, one go-redis client (pool 64) per server, in one process. Uncontended groups: each goroutine acquires and releases its own key in a loop (redsync: NewMutex + LockContext + UnlockContext at its defaults; lockx: a Client over redislock.NewQuorum with its defaults and WithLease, so no watchdog). Refused-tries group: one holder holds a key on all five servers and 16 goroutines try it once, again and again; an operation is one refused try, its cost what the five servers and the clients carried for it. Round trips (go-redis hook), server commands (INFO commandstats, including the commands a script calls) and server CPU (INFO cpu, user + system) are summed over the five servers.",
		cols:  []col{colRate("ops/s"), colP50, colP99, colRTT("round trips/op"), colCmds("server cmds/op"), {mSrvCPU, "server CPU µs/op", false}, colFail},
		ratio: mRate, ratioHeader: "× redsync (per run)",
	},
	{
		key:   leaderSection,
		title: "Leader election: graceful handover (patterns/leader)",
		intro: "Two candidates (two Elections on one lockx Client, so two owners; each on a Client of its own would need a wrapper to share the backend, and the wrapper would hide its notifications); one leads, the other is queued behind it (checked through the backend's Inspector before the clock starts); the time runs from the leader's Resign to the other's Campaign returning: the release, the wake-up by notification and the grant. Then the roles swap. Issue 36's target: p99 ≤ 10 ms on Redis.",
		cols:  []col{colRate("handovers/s"), colP50, colP99, {mMax, "max ms", false}, colFail},
	},
	{
		key:   pgSection,
		title: "PostgreSQL: uncontended acquire + release",
		intro: "Raw: each goroutine on its own pinned connection of one pool of n connections, session advisory locks. lockx pglock gets a pool of the same size (at least 6; it pins 2 holder sessions, 1 wait session and, while anyone waits, a listener), connected at set-up with the Backend's Connect, as the raw connections are pinned before the clock starts.",
		cols:  []col{colRate("pairs/s"), colP50, colP99, colFail},
		ratio: mRate, ratioHeader: "× raw (per run)",
	},
	{
		key:   pgHotSection,
		title: "PostgreSQL: one hot key, 16 independent clients",
		intro: "Raw rows: 16 pinned connections (the token row adds nextval of a sequence to each blocking grant, with asynchronous commit as pglock's sessions: the least a lock with durable fencing tokens does); lockx: 16 clients, each with its own pool of 6 connections (pglock pins 2 holder sessions, 1 wait session on which a waiter queues in PostgreSQL's lock queue, and a listener), connected at set-up with the Backend's Connect, as the raw rows pin theirs before the clock starts. Handoffs and waits as in the Redis hot-key table.",
		cols: []col{colRate("handoffs/s"), {mP50, "wait p50 ms", false}, {mP99, "wait p99 ms", true},
			{mMax, "wait max ms", false}, {mFails, "failed calls", false}, colViol},
		ratio: mRate, ratioHeader: "× raw (per run)",
	}, {
		key:   zkSection,
		title: "ZooKeeper: uncontended acquire + release",
		intro: "A standalone ZooKeeper 3.8 (Debian's package, default durability: every write fsynced) started by the benchmark; one connection (one session) shared by the goroutines, each on its own key. Raw: go-zookeeper's own lock recipe (zk.NewLock: protected ephemeral sequential node, list the children, delete: 3 round trips per pair, 2 of them writes). lockx zklock with WithLease, so no watchdog: one multi (create the node and read the fencing token and the child count) and one delete: 2 round trips, both writes.",
		cols:  []col{colRate("pairs/s"), colP50, colP99, colFail},
		ratio: mRate, ratioHeader: "× raw (per run)",
	},
	{
		key:   zkHotSection,
		title: "ZooKeeper: one hot key, 16 independent clients",
		intro: "16 clients, each with its own ZooKeeper session, lock one key, release it at once and lock again. Both rows queue in ZooKeeper (a sequential node each) and wait on their predecessor's watch. Handoffs and waits as in the Redis hot-key table.",
		cols: []col{colRate("handoffs/s"), {mP50, "wait p50 ms", false}, {mP99, "wait p99 ms", true},
			{mMax, "wait max ms", false}, {mFails, "failed calls", false}, colViol},
		ratio: mRate, ratioHeader: "× raw (per run)",
	},
	rwTable,
	semTable,
	lockxdTable,
	lockxdHotTable,
	{
		key:   etcdSection,
		title: "etcd: uncontended acquire + release",
		intro: "One etcd 3.7 member started in the benchmark's process (go.etcd.io/etcd/server/v3/embed, default durability: the write-ahead log fsynced), one client shared by the goroutines, each on its own key. Raw: etcd's own recipe (client/v3/concurrency: one session whose lease the client keeps alive, NewMutex + Lock + Unlock: a put-if-absent transaction with a read of the head, and a delete: 2 round trips, both writes). lockx etcdlock with WithLease, so no watchdog: a put-if-empty transaction on a lease of the lock's own (a spare one left by an earlier release, renewed by a keep-alive sent alongside when it is due; a new grant only when none is spare) and a delete checked against the create revision: 2 round trips, both writes, as raw.",
		cols:  []col{colRate("pairs/s"), colP50, colP99, colFail},
		ratio: mRate, ratioHeader: "× raw (per run)",
	},
	{
		key:   etcdHotSection,
		title: "etcd: one hot key, 16 independent clients",
		intro: "16 clients, each with its own etcd client (and, raw, its own session), lock one key, release it at once and lock again. Raw: every waiter queues (a key each) and watches its predecessor; the head holds when its predecessor is deleted. lockx etcdlock does the same, plain or Fair (a plain waiter's entry is withdrawn 250 ms after it stops waiting); a waiter at the head holds at once and takes the lock with one read. Handoffs and waits as in the Redis hot-key table.",
		cols: []col{colRate("handoffs/s"), {mP50, "wait p50 ms", false}, {mP99, "wait p99 ms", true},
			{mMax, "wait max ms", false}, {mFails, "failed calls", false}, colViol},
		ratio: mRate, ratioHeader: "× raw (per run)",
	},
}

// values returns the metric key of every run that has it.
func (r *Result) values(key string) []float64 {
	var v []float64
	for _, s := range r.Runs {
		if x, ok := s[key]; ok && s != nil {
			v = append(v, x)
		}
	}
	return v
}

// ratios returns a.key / b.key for every run in which both were measured.
func ratios(a, b *Result, key string) []float64 {
	if a == nil || b == nil {
		return nil
	}
	var v []float64
	for i := range a.Runs {
		if i >= len(b.Runs) || a.Runs[i] == nil || b.Runs[i] == nil {
			continue
		}
		x, ok1 := a.Runs[i][key]
		y, ok2 := b.Runs[i][key]
		if ok1 && ok2 && y != 0 {
			v = append(v, x/y)
		}
	}
	return v
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// num formats a figure with as many digits as it deserves.
func num(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "—"
	case v == 0:
		return "0"
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 0.1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

// spreadOf formats median (min–max), or just the median for one run.
func spreadOf(v []float64, spread bool) string {
	if len(v) == 0 {
		return "—"
	}
	m := num(median(v))
	if !spread || len(v) < 2 {
		return m
	}
	return fmt.Sprintf("%s (%s–%s)", m, num(slices.Min(v)), num(slices.Max(v)))
}

// Results indexes results by section, group and name.
type Results []*Result

func (rs Results) find(section, group, name string) *Result {
	for _, r := range rs {
		if r.Case.Section == section && r.Case.Group == group && r.Case.Name == name {
			return r
		}
	}
	return nil
}

func (rs Results) baseline(c *Case) *Result {
	for _, r := range rs {
		if r.Case.Section == c.Section && r.Case.Group == c.Group && r.Case.Baseline {
			return r
		}
	}
	return nil
}

// writeTable writes one section as a Markdown table; it writes nothing if
// no case of the section was selected.
func writeTable(w io.Writer, sec section, rs Results) {
	var rows []*Result
	for _, r := range rs {
		if r.Case.Section == sec.key {
			rows = append(rows, r)
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "### %s\n\n%s\n\n", sec.title, sec.intro)
	hdr := []string{"", "case"}
	for _, c := range sec.cols {
		hdr = append(hdr, c.header)
	}
	if sec.ratio != "" {
		hdr = append(hdr, sec.ratioHeader)
	}
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(hdr, " | "), strings.Repeat("---|", len(hdr)))
	lastGroup := ""
	for _, r := range rows {
		group := r.Case.Group
		if group == lastGroup {
			group = ""
		}
		lastGroup = r.Case.Group
		cells := []string{group, r.Case.Name}
		measured := len(r.values(sec.cols[0].key)) > 0
		for i, c := range sec.cols {
			switch {
			case measured:
				cells = append(cells, spreadOf(r.values(c.key), c.spread))
			case i == 0 && r.Err != nil:
				cells = append(cells, errCell(r.Err))
			default:
				cells = append(cells, "—")
			}
		}
		if sec.ratio != "" {
			cell := "—"
			if r.Case.Baseline {
				cell = "1"
			} else if b := rs.baseline(r.Case); b != nil && measured {
				if v := ratios(r, b, sec.ratio); len(v) > 0 {
					cell = spreadOf(v, true)
				}
			}
			cells = append(cells, cell)
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		got := len(r.values(sec.cols[0].key))
		if got > 0 && r.Err != nil && !r.Case.Once {
			fmt.Fprintf(w, "- %s: measured in %d of %d runs; the others failed: %s\n", r.Case.Name, got, len(r.Runs), errCell(r.Err))
		}
	}
	fmt.Fprintln(w)
}

func errCell(err error) string {
	s := err.Error()
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return strings.ReplaceAll(s, "|", "/")
}

// Meta describes the run for the report's header.
type Meta struct {
	Command        string
	Started, Ended time.Time
	LoadStart      string // /proc/loadavg at the start
	LoadEnd        string
	Machine        string // nproc and CPU model
	Versions       []string
	Config         Config
	Plots          []string // image paths relative to the report
	Notes          []string
}

// WriteReport writes the whole Markdown report: header, targets, tables,
// plots.
func WriteReport(w io.Writer, m Meta, rs Results) {
	fmt.Fprintf(w, "# Benchmarks\n\n")
	fmt.Fprintf(w, "Generated by `lockxbench` — do not edit by hand; rerun it instead.\n\n")
	fmt.Fprintf(w, "- Date: %s (%.0f min)\n", m.Started.UTC().Format("2006-01-02 15:04 UTC"), m.Ended.Sub(m.Started).Minutes())
	fmt.Fprintf(w, "- Machine: %s; load average at start %s, at end %s\n", m.Machine, m.LoadStart, m.LoadEnd)
	for _, v := range m.Versions {
		fmt.Fprintf(w, "- %s\n", v)
	}
	fmt.Fprintf(w, "- Command: `%s` (%d run(s), %v warm-up + %v measured per case and run; figures are the median over runs with the min–max spread in brackets; every ratio is computed inside one run and then summarised the same way)\n", m.Command, m.Config.Runs, m.Config.Warmup, m.Config.Duration)
	for _, n := range m.Notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
	fmt.Fprintln(w)

	fmt.Fprintf(w, "## Targets\n\n")
	fmt.Fprintf(w, "| issue | target | status | measured |\n|---|---|---|---|\n")
	for _, t := range evalTargets(rs) {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", t.issue, t.text, t.status, t.detail)
	}
	fmt.Fprintln(w)

	fmt.Fprintf(w, "## Results\n\n")
	for _, sec := range sections {
		writeTable(w, sec, rs)
	}
	if len(m.Plots) > 0 {
		fmt.Fprintf(w, "## Scaling\n\n")
		for _, p := range m.Plots {
			fmt.Fprintf(w, "![%s](%s)\n\n", strings.TrimSuffix(p[strings.LastIndex(p, "/")+1:], ".png"), p)
		}
	}
}
