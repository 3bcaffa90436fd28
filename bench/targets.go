package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// target is one line of the targets table.
type target struct {
	issue, text, status, detail string
}

const (
	statusMet = "met"
	statusNA  = "not measured"
)

// missed formats a miss with the measured figure and the reason the data
// shows.
func missed(measured, reason string) string {
	return fmt.Sprintf("missed (measured %s; %s)", measured, reason)
}

// ratioTarget checks median(a/b per run) ≥ want.
func ratioTarget(issue, text string, a, b *Result, key string, want float64, reason func(got float64) string) target {
	t := target{issue: issue, text: text}
	if a == nil || b == nil {
		t.status = statusNA
		return t
	}
	v := ratios(a, b, key)
	if len(v) == 0 {
		t.status = statusNA
		t.detail = skipReason(a, b)
		return t
	}
	got := median(v)
	t.detail = fmt.Sprintf("%s× (runs %s–%s); %s %s vs %s %s", num(got), num(slices.Min(v)), num(slices.Max(v)),
		num(med(a, key)), a.Case.Name, num(med(b, key)), b.Case.Name)
	if got >= want {
		t.status = statusMet
	} else {
		t.status = missed(num(got)+"×", reason(got))
	}
	return t
}

func skipReason(rs ...*Result) string {
	for _, r := range rs {
		if r != nil && r.Err != nil {
			return errCell(r.Err)
		}
	}
	return ""
}

// med is the median of a result's metric, NaN if absent.
func med(r *Result, key string) float64 {
	if r == nil {
		return math.NaN()
	}
	return median(r.values(key))
}

// evalTargets checks every target of issues 2, 3, 4, 5 and 13 against the runs.
func evalTargets(rs Results) []target {
	var out []target
	g64 := groupGoroutines(64)
	raw := rs.find(scalingSection, g64, nameRaw)
	lx := rs.find(scalingSection, g64, nameLockx)
	cmds := func(float64) string {
		return fmt.Sprintf("lockx makes %s round trips and %s server commands per pair, raw %s and %s; lockx allocates %s per pair, raw %s",
			num(med(lx, mRTT)), num(med(lx, mCmds)), num(med(raw, mRTT)), num(med(raw, mCmds)),
			num(med(rs.find(allocSection, "1 goroutine", nameLockx), "allocs/op")),
			num(med(rs.find(allocSection, "1 goroutine", nameRaw), "allocs/op")))
	}
	out = append(out,
		ratioTarget("2, 13", "uncontended, 64 goroutines: lockx ≥ 0.95× raw go-redis pairs/s", lx, raw, mRate, 0.95, cmds),
		ratioTarget("13", "uncontended, 64 goroutines: lockx ≥ 1.1× bsm/redislock", lx, rs.find(scalingSection, g64, nameBsm), mRate, 1.1, cmds),
		ratioTarget("13", "uncontended, 64 goroutines: lockx ≥ 1.3× redsync (1 pool)", lx, rs.find(scalingSection, g64, nameRedsync), mRate, 1.3, cmds),
	)

	rt := target{issue: "2", text: "at most 2 round trips per uncontended pair"}
	if c := med(lx, mRTT); math.IsNaN(c) {
		rt.status, rt.detail = statusNA, skipReason(lx)
	} else {
		rt.detail = fmt.Sprintf("%s round trips per pair at 64 goroutines (amortised over shared pipelines), %s at 1 goroutine (go-redis hook; pub/sub not counted)", num(c), num(med(rs.find(scalingSection, groupGoroutines(1), nameLockx), mRTT)))
		if c1 := med(rs.find(scalingSection, groupGoroutines(1), nameLockx), mRTT); c <= 2.005 && (math.IsNaN(c1) || c1 <= 2.005) {
			rt.status = statusMet
		} else {
			rt.status = missed(num(c), fmt.Sprintf("%s server commands per pair", num(med(lx, mCmds))))
		}
	}
	out = append(out, rt)

	// Hot key.
	hotLx := rs.find(hotSection, hotGroup, nameHotLockx)
	hotFair := rs.find(hotSection, hotGroup, nameHotFair)
	hotRaw := rs.find(hotSection, hotGroup, nameHotRaw)
	best := hotBestPeer(rs)
	hotReason := func(float64) string {
		return fmt.Sprintf("lockx default %s handoffs/s with %s round trips/handoff, p50 wait %s ms; Fair() %s handoffs/s",
			num(med(hotLx, mRate)), num(med(hotLx, mRTT)), num(med(hotLx, mP50)), num(med(hotFair, mRate)))
	}
	t := ratioTarget("13", "hot key, 16 clients: lockx (defaults) handoffs/s ≥ 2× the best peer at its best setting (best of each run)", hotLx, best, mRate, 2, hotReason)
	if f := ratios(hotFair, best, mRate); len(f) > 0 {
		t.detail += fmt.Sprintf("; Fair(): %s×", num(median(f)))
	}
	out = append(out, t,
		ratioTarget("2", "hot key, 16 clients: lockx (defaults) handoffs/s ≥ 2.5× raw SET NX with 1 ms sleep", hotLx, hotRaw, mRate, 2.5, hotReason))

	p99 := target{issue: "2, 13", text: "hot key, 16 clients: p99 handoff wait ≤ 10 ms in fair mode"}
	if v := med(hotFair, mP99); math.IsNaN(v) {
		p99.status, p99.detail = statusNA, skipReason(hotFair)
	} else {
		p99.detail = fmt.Sprintf("p99 %s ms (runs %s–%s), max %s ms", num(v), num(slices.Min(hotFair.values(mP99))), num(slices.Max(hotFair.values(mP99))), num(med(hotFair, mMax)))
		if v <= 10 {
			p99.status = statusMet
		} else {
			p99.status = missed(num(v)+" ms", fmt.Sprintf("%s handoffs/s, %s round trips/handoff; in a FIFO of 16 clients each grant waits for ~15 handoffs", num(med(hotFair, mRate)), num(med(hotFair, mRTT))))
		}
	}
	out = append(out, p99)

	// Allocations.
	ag := "1 goroutine"
	aRaw, aLx := rs.find(allocSection, ag, nameRaw), rs.find(allocSection, ag, nameLockx)
	at := target{issue: "2, 13", text: "allocations per uncontended pair ≤ 1.5× raw go-redis"}
	if a, b := med(aLx, "allocs/op"), med(aRaw, "allocs/op"); math.IsNaN(a) || math.IsNaN(b) {
		at.status, at.detail = statusNA, skipReason(aLx, aRaw)
	} else {
		at.detail = fmt.Sprintf("lockx %s allocs/pair, raw %s (%s×)", num(a), num(b), num(a/b))
		if a <= 1.5*b {
			at.status = statusMet
		} else {
			at.status = missed(num(a/b)+"×", fmt.Sprintf("%s B/pair vs raw %s B/pair", num(med(aLx, "B/op")), num(med(aRaw, "B/op"))))
		}
	}
	out = append(out, at)
	bt := target{issue: "13", text: "allocations per uncontended pair below every peer's"}
	if a := med(aLx, "allocs/op"); math.IsNaN(a) {
		bt.status, bt.detail = statusNA, skipReason(aLx)
	} else {
		lowest, who := math.Inf(1), ""
		for _, n := range []string{nameBsm, nameRedsync, nameRedsync5} {
			if v := med(rs.find(allocSection, ag, n), "allocs/op"); v < lowest {
				lowest, who = v, n
			}
		}
		bt.detail = fmt.Sprintf("lockx %s, lowest peer %s (%s)", num(a), num(lowest), who)
		if a < lowest {
			bt.status = statusMet
		} else {
			bt.status = missed(num(a), "at or above "+who)
		}
	}
	out = append(out, bt)

	// Memory.
	mt := target{issue: "2", text: "Redis memory per held lock (with its fence state) ≤ 150 B"}
	mem := rs.find(memSection, fmt.Sprintf("%d held locks", memLocks), nameMemLockx)
	if v := med(mem, "bytes/lock"); math.IsNaN(v) {
		mt.status, mt.detail = statusNA, skipReason(mem)
	} else {
		mt.detail = fmt.Sprintf("%s B/lock, %s Redis keys/lock", num(v), num(med(mem, "keys/lock")))
		if v <= 150 {
			mt.status = statusMet
		} else {
			mt.status = missed(num(v)+" B", fmt.Sprintf("%s Redis keys per lock; a bare SET … PX under the same key name costs %s B in this run",
				num(med(mem, "keys/lock")), num(med(rs.find(memSection, fmt.Sprintf("%d held locks", memLocks), nameMemRawRenamed), "bytes/lock"))))
		}
	}
	out = append(out, mt)

	out = append(out, batchingTargets(rs)...)

	// PostgreSQL (issue 3).
	g32 := groupGoroutines(pgUncontendedNs)
	pgLx := rs.find(pgSection, g32, namePGLockx)
	pgRaw := rs.find(pgSection, g32, namePGRaw)
	out = append(out, ratioTarget("3", "PostgreSQL uncontended, 32 goroutines: lockx ≥ 0.8× raw advisory-lock pairs", pgLx, pgRaw, mRate, 0.8,
		func(float64) string {
			return fmt.Sprintf("lockx p50 %s ms vs raw %s ms", num(med(pgLx, mP50)), num(med(pgRaw, mP50)))
		}))
	pgHot := rs.find(pgHotSection, hotGroup, namePGHotLockx)
	out = append(out, ratioTarget("3", "PostgreSQL hot key, 16 clients: lockx handoffs/s ≥ 2× raw try-lock with 1 ms sleep", pgHot, rs.find(pgHotSection, hotGroup, namePGHotRaw), mRate, 2,
		func(float64) string { return fmt.Sprintf("lockx p50 wait %s ms", num(med(pgHot, mP50))) }))
	pt := target{issue: "3", text: "PostgreSQL hot key: p99 handoff wait ≤ 20 ms"}
	if v := med(pgHot, mP99); math.IsNaN(v) {
		pt.status, pt.detail = statusNA, skipReason(pgHot)
	} else {
		pt.detail = fmt.Sprintf("p99 %s ms", num(v))
		if v <= 20 {
			pt.status = statusMet
		} else {
			pt.status = missed(num(v)+" ms", fmt.Sprintf("%s handoffs/s", num(med(pgHot, mRate))))
		}
	}
	out = append(out, pt)
	out = append(out, pgQueueTargets(rs)...)
	out = append(out, redlockTargets(rs)...)
	out = append(out, patternTargets(rs)...)
	out = append(out, issue31Targets(rs)...)
	return append(out, leaderTarget(rs))
}

// issue31Targets: lockx on Redis at least as fast as the best peer at every
// concurrency, one process's hot key against rueidislock's shared Locker,
// and the cost of an operation next to its floor.
func issue31Targets(rs Results) []target {
	var out []target
	for _, n := range pairGoroutines {
		g := groupGoroutines(n)
		lx := rs.find(scalingSection, g, nameLockx)
		best := bestOf("the better of raw go-redis and bsm/redislock", mRate,
			rs.find(scalingSection, g, nameRaw), rs.find(scalingSection, g, nameBsm))
		text := "uncontended, " + g + ": lockx ≥ 1.0× the better of raw go-redis and bsm/redislock"
		why := func(float64) string {
			return fmt.Sprintf("%s round trips and %s server commands per pair", num(med(lx, mRTT)), num(med(lx, mCmds)))
		}
		seq := ratioTarget("31", text, lx, best, mRate, 1.0, why)
		if !slices.Contains(pairedUncontended, n) {
			// Beside the token-less peers, the floor of a lock with
			// fencing tokens (raw go-redis running the two scripts such a
			// lock needs), measured in the same run.
			out = append(out, seq, ratioTarget("31", "uncontended, "+g+": lockx within 10 % of the floor of a fenced lock (≥ 0.9×), where the target above is beyond it",
				lx, rs.find(scalingSection, g, nameFencedFloor), mRate, 0.9, why))
			continue
		}
		// Few callers: judged on the paired rows (each goroutine alternates
		// the peer's pair and lockx's), the rows measured one after the
		// other are shown beside them.
		t := pairedRateTarget("31", text+" (paired, alternately)", 1.0, why,
			rs.find(pairedSection, g, pairedVsName(nameRaw)), rs.find(pairedSection, g, pairedVsName(nameBsm)))
		if seq.detail != "" {
			t.detail += "; measured one after the other: " + seq.detail
		}
		// Neither peer issues a fencing token; the floor of a lock that
		// does, measured alternately too, is what the hardware allows.
		out = append(out, t, pairedRateTarget("31", "uncontended, "+g+": lockx within 10 % of the floor of a fenced lock (≥ 0.9×, paired, alternately), where the target above is beyond it", 0.9, why,
			rs.find(pairedSection, g, pairedVsName(nameFencedFloor))))
	}
	local := rs.find(localSection, "16 goroutines, one key", nameLocalFirst)
	out = append(out, ratioTarget("31", "one process, 16 goroutines, one key: lockx LocalFirst() ≥ 2× rueidislock's shared Locker", local,
		rs.find(localSection, "16 goroutines, one key", nameLocalRueidis), mRate, 2,
		func(float64) string { return fmt.Sprintf("p99 wait %s ms", num(med(local, mP99))) }))
	// The hot key: against the best peer, and the handoff rate and wait
	// next to the floor row (a token passed through a list), measured in
	// the same run.
	hotLx := rs.find(hotSection, hotGroup, nameHotLockx)
	hotFair := rs.find(hotSection, hotGroup, nameHotFair)
	floor := rs.find(hotSection, hotGroup, nameHotFloor)
	best := hotBestPeer(rs)
	vsFloor := func(r *Result) func(float64) string {
		return func(float64) string {
			return fmt.Sprintf("%s handoffs/s, p99 %s ms; the floor row %s handoffs/s (%s× of it), p99 %s ms",
				num(med(r, mRate)), num(med(r, mP99)), num(med(floor, mRate)), num(median(ratios(r, floor, mRate))), num(med(floor, mP99)))
		}
	}
	out = append(out,
		ratioTarget("31", "hot key, 16 clients, defaults: lockx ≥ 2.5× the best peer at its best setting (best of each run)", hotLx, best, mRate, 2.5, vsFloor(hotLx)),
		limitTarget("31", "hot key, 16 clients, defaults: p99 handoff wait ≤ 5 ms", hotLx, mP99, 5, true, "ms", vsFloor(hotLx)),
		limitTarget("31", "hot key, 16 clients, Fair(): ≥ 7,000 handoffs/s", hotFair, mRate, 7000, false, "handoffs/s", vsFloor(hotFair)),
		limitTarget("31", "hot key, 16 clients, Fair(): p99 handoff wait ≤ 5 ms", hotFair, mP99, 5, true, "ms", vsFloor(hotFair)),
		ratioTarget("31", "hot key, 16 clients, defaults: lockx within 10 % of the floor (≥ 0.9× a token passed through a list), where a target above is beyond it", hotLx, floor, mRate, 0.9, vsFloor(hotLx)),
	)
	// Costs next to their floors: raw go-redis's pair (SET NX, then a
	// compare-and-delete script) and one round trip per handoff (the
	// release that grants the next in line).
	g1 := groupGoroutines(1)
	lx, raw := rs.find(scalingSection, g1, nameLockx), rs.find(scalingSection, g1, nameRaw)
	out = append(out,
		floorTarget("server commands per uncontended pair (1 goroutine) ≤ the floor, raw go-redis's", med(lx, mCmds), med(raw, mCmds)),
		floorTarget("allocations per uncontended pair ≤ the floor, raw go-redis's", med(rs.find(allocSection, g1, nameLockx), "allocs/op"),
			med(rs.find(allocSection, g1, nameRaw), "allocs/op")),
		floorTarget("hot key, 16 clients, defaults: round trips per handoff ≤ the floor, 2 (the waiter's one attempt, which queues it, and the release that grants it; one of them, the release, on the handoff's path)",
			med(rs.find(hotSection, hotGroup, nameHotLockx), mRTT), 2))
	// Memory against a bare SET … PX of the same key name, so that only
	// what the library stores is compared (value, fence state, expiry).
	memGroup := fmt.Sprintf("%d held locks", memLocks)
	mem, bare := rs.find(memSection, memGroup, nameMemLockx), rs.find(memSection, memGroup, nameMemRawRenamed)
	mt := floorTarget("Redis memory per held lock, fence state included, ≤ the floor, a bare SET … PX under the same key name", med(mem, "bytes/lock"), med(bare, "bytes/lock"))
	if mt.detail != "" {
		mt.detail += " (bytes)"
	}
	out = append(out, mt)
	return out
}

// floorTarget compares a cost with its floor: met at or below it.
func floorTarget(text string, got, floor float64) target {
	t := target{issue: "31", text: text, status: statusNA}
	if math.IsNaN(got) || math.IsNaN(floor) {
		return t
	}
	t.detail = fmt.Sprintf("%s, floor %s", num(got), num(floor))
	// At the floor as printed: a mean of 2.0004 round trips (a handoff
	// that straddles the window's edge) is the floor of 2.
	if got <= floor*1.0025 {
		t.status = statusMet
	} else {
		t.status = missed(num(got), fmt.Sprintf("%s× the floor", num(got/floor)))
	}
	return t
}

// pairedRateTarget checks that lockx's rate is at least least times that of
// every peer measured against it alternately (paired rows, lockx the b
// side): the rate ratio of a paired row is the inverse ratio of its mean
// latencies, and the worst peer's median over runs counts.
func pairedRateTarget(issue, text string, least float64, why func(float64) string, rs ...*Result) target {
	t := target{issue: issue, text: text}
	worst, name := math.Inf(1), ""
	var parts []string
	for _, r := range rs {
		var v []float64
		if r != nil {
			for _, s := range r.Runs {
				if a, b := s[mPairA+" mean"], s[mPairB+" mean"]; s != nil && a > 0 && b > 0 {
					v = append(v, a/b)
				}
			}
		}
		if len(v) == 0 {
			t.status, t.detail = statusNA, skipReason(r)
			return t
		}
		got := median(v)
		parts = append(parts, fmt.Sprintf("%s× (runs %s–%s; mean pair %s vs %s µs) %s", num(got), num(slices.Min(v)), num(slices.Max(v)),
			num(med(r, mPairB+" mean")), num(med(r, mPairA+" mean")), r.Case.Name))
		if got < worst {
			worst, name = got, r.Case.Name
		}
	}
	t.detail = strings.Join(parts, "; ")
	if worst >= least {
		t.status = statusMet
	} else {
		t.status = missed(num(worst)+"× ("+name+")", why(worst))
	}
	return t
}

// limitTarget checks a result's median of key against a fixed bound: at
// most want when atMost, else at least want.
func limitTarget(issue, text string, r *Result, key string, want float64, atMost bool, unit string, reason func(float64) string) target {
	t := target{issue: issue, text: text}
	v := med(r, key)
	if math.IsNaN(v) {
		t.status, t.detail = statusNA, skipReason(r)
		return t
	}
	vs := r.values(key)
	t.detail = fmt.Sprintf("%s %s (runs %s–%s)", num(v), unit, num(slices.Min(vs)), num(slices.Max(vs)))
	if (atMost && v <= want) || (!atMost && v >= want) {
		t.status = statusMet
	} else {
		t.status = missed(num(v)+" "+unit, reason(v))
	}
	return t
}

// bestOf is a result whose every run holds, for key, the largest value of
// rs in that run: the best peer of each run, so that ratios stay within a
// run. Nil if any of rs is missing.
func bestOf(name, key string, rs ...*Result) *Result {
	best := &Result{Case: &Case{Name: name}}
	for _, r := range rs {
		if r == nil {
			return nil
		}
		for i, s := range r.Runs {
			for len(best.Runs) <= i {
				best.Runs = append(best.Runs, nil)
			}
			if v, ok := s[key]; ok && s != nil {
				if best.Runs[i] == nil {
					best.Runs[i] = Sample{}
				}
				if cur, ok := best.Runs[i][key]; !ok || v > cur {
					best.Runs[i][key] = v
				}
			}
		}
	}
	return best
}

// leaderTarget is issue 36's: a graceful leader handover on Redis within
// 10 ms at the 99th percentile.
func leaderTarget(rs Results) target {
	r := rs.find(leaderSection, "Redis", nameHandover)
	t := target{issue: "36", text: "leader election on Redis: graceful handover (Resign → next candidate leads) p99 ≤ 10 ms"}
	v := med(r, mP99)
	switch {
	case math.IsNaN(v):
		t.status, t.detail = statusNA, skipReason(r)
	case v <= 10:
		t.status = statusMet
	default:
		t.status = missed(num(v)+" ms", fmt.Sprintf("%s handovers/s", num(med(r, mRate))))
	}
	if !math.IsNaN(v) {
		t.detail = fmt.Sprintf("p99 %s ms (runs %s–%s), p50 %s ms", num(v), num(slices.Min(r.values(mP99))), num(slices.Max(r.values(mP99))), num(med(r, mP50)))
	}
	return t
}

// redlockTargets: issue 4's ≥ 1.2× redsync (5 pools) at each goroutine
// count of the Redlock table, and the cost of a refused try.
func redlockTargets(rs Results) []target {
	var out []target
	for _, n := range []int{1, 16, 64} {
		g := groupGoroutines(n)
		q, r := rs.find(redlockSection, g, nameQuorum), rs.find(redlockSection, g, nameRedsync5)
		out = append(out, ratioTarget("4", fmt.Sprintf("Redlock, 5 servers, uncontended, %s: lockx quorum ≥ 1.2× redsync (5 pools) pairs/s", g), q, r, mRate, 1.2,
			func(float64) string {
				return fmt.Sprintf("p99 %s ms vs %s ms; server CPU %s µs/pair vs %s µs/pair on the 5 servers (lockx's scripts vs SET NX + compare-and-delete)",
					num(med(q, mP99)), num(med(r, mP99)), num(med(q, mSrvCPU)), num(med(r, mSrvCPU)))
			}))
	}
	q, r := rs.find(redlockSection, redlockRetry, nameRetryQuorum), rs.find(redlockSection, redlockRetry, nameRetryRs)
	t := target{issue: "4", text: "Redlock retry storm: a refused try costs the 5 servers less CPU than redsync's (which releases on every node after every failed try)"}
	a, b := med(q, mSrvCPU), med(r, mSrvCPU)
	if math.IsNaN(a) || math.IsNaN(b) {
		t.status, t.detail = statusNA, skipReason(q, r)
		return append(out, t)
	}
	t.detail = fmt.Sprintf("%s µs vs %s µs server CPU per refused try; %s vs %s server commands, %s vs %s round trips; %s vs %s tries/s",
		num(a), num(b), num(med(q, mCmds)), num(med(r, mCmds)), num(med(q, mRTT)), num(med(r, mRTT)), num(med(q, mRate)), num(med(r, mRate)))
	if a < b {
		t.status = statusMet
	} else {
		t.status = missed(num(a)+" µs", "at or above redsync's")
	}
	return append(out, t)
}

// hotBestPeer is the hot-key table's best peer of each run: bsm/redislock
// and redsync at their default and their best retry settings.
func hotBestPeer(rs Results) *Result {
	return bestPerRun([]*Result{rs.find(hotSection, hotGroup, nameHotBsm10), rs.find(hotSection, hotGroup, nameHotBsm1),
		rs.find(hotSection, hotGroup, nameHotRs), rs.find(hotSection, hotGroup, nameHotRs1)})
}

// bestPerRun builds a synthetic result whose run i holds, of the given
// results, the sample with the highest rate in run i.
func bestPerRun(rs []*Result) *Result {
	best := &Result{Case: &Case{Name: "best peer"}}
	for _, r := range rs {
		if r == nil {
			continue
		}
		for len(best.Runs) < len(r.Runs) {
			best.Runs = append(best.Runs, nil)
		}
		for i, s := range r.Runs {
			if s != nil && (best.Runs[i] == nil || s[mRate] > best.Runs[i][mRate]) {
				best.Runs[i] = s
			}
		}
	}
	return best
}

// batchingTargets checks issue 17's targets: the batching table, the
// paired latencies and the watchdog's round trips.
func batchingTargets(rs Results) []target {
	g64 := groupGoroutines(64)
	lx := rs.find(batchSection, g64, nameLockxBatched)
	rue := rs.find(batchSection, g64, nameRueidis)
	raw := rs.find(batchSection, g64, nameRaw)
	unb := rs.find(batchSection, g64, nameLockxUnbatch)
	rap := rs.find(batchSection, g64, nameRawAP)
	why := func(float64) string {
		return fmt.Sprintf("lockx %s pairs/s with %s server commands per pair (fencing token, tombstone, fair-queue checks), rueidislock %s, raw %s, raw through go-redis's autopipeliner %s (the ceiling of go-redis batching), lockx unbatched %s; client and Redis share 2 cores",
			num(med(lx, mRate)), num(med(lx, mCmds)), num(med(rue, mRate)), num(med(raw, mRate)), num(med(rap, mRate)), num(med(unb, mRate)))
	}
	out := []target{
		ratioTarget("17", "uncontended, 64 goroutines: lockx (batched) ≥ 1.0× rueidislock (one key per lock)", lx, rue, mRate, 1.0, why),
		ratioTarget("17", "uncontended, 64 goroutines: lockx (batched) ≥ 1.8× raw go-redis", lx, raw, mRate, 1.8, why),
		pairedTarget("17", "1 goroutine: batched pair latency (p50) within 5 % of unbatched (paired)", rs.find(pairedSection, "1 goroutine", namePairedBatch), 1.05),
		pairedTarget("17", "AcquireMany of 10 keys: latency (p50) ≤ 1.5× a single Acquire (paired)", rs.find(pairedSection, "1 goroutine", namePairedMany), 1.5),
	}

	wt := target{issue: "17", text: "10,000 held locks, watchdog on: ≤ 1 round trip per node per 100 locks per renewal period"}
	wd := rs.find(watchdogSection, fmt.Sprintf("%d held locks", watchdogLocks), fmt.Sprintf("lockx, 10,000 locks with WithWatchdog(%v)", watchdogLease))
	if v, owed := med(wd, "rtt/s"), med(wd, "renewals/s owed"); math.IsNaN(v) || math.IsNaN(owed) || owed == 0 {
		wt.status, wt.detail = statusNA, skipReason(wd)
	} else {
		per100 := v / owed * 100 // round trips per 100 renewals, one node
		wt.detail = fmt.Sprintf("%s round trips per 100 renewals (%s round trips/s for %s renewals/s owed, one node); Redis CPU %s %% of a core, client %s %%",
			num(per100), num(v), num(owed), num(med(wd, "redis cpu%")), num(med(wd, "client cpu%")))
		if per100 <= 1 {
			wt.status = statusMet
		} else {
			wt.status = missed(num(per100), "renewal batches split")
		}
	}
	return append(out, wt)
}

// pairedTarget checks the median over runs of a paired case's b/a ≤ want.
func pairedTarget(issue, text string, r *Result, want float64) target {
	t := target{issue: issue, text: text}
	v := []float64(nil)
	if r != nil {
		v = r.values(mPairRatio)
	}
	if len(v) == 0 {
		t.status, t.detail = statusNA, skipReason(r)
		return t
	}
	got := median(v)
	t.detail = fmt.Sprintf("%s× of the medians (runs %s–%s); p50 %s µs vs %s µs, means %s vs %s µs (%s)", num(got), num(slices.Min(v)), num(slices.Max(v)),
		num(med(r, mPairB)), num(med(r, mPairA)), num(med(r, mPairB+" mean")), num(med(r, mPairA+" mean")), r.Case.Name)
	if got <= want {
		t.status = statusMet
	} else {
		t.status = missed(num(got)+"×", "see docs/backends.md, Redis: batching")
	}
	return t
}

// pgQueueTargets checks issue 32: pglock on a hot key against PostgreSQL's
// own queue with a token per grant (the floor of a lock with durable
// tokens), with the bench's pool and with pgxpool's default MaxConns, and
// the uncontended case against raw pairs.
func pgQueueTargets(rs Results) []target {
	var out []target
	floor := rs.find(pgHotSection, hotGroup, namePGHotToken)
	for _, row := range []struct{ name, text string }{
		{namePGHotLockx, "the bench's pool"},
		{namePGHotDefPool, "pgxpool's default MaxConns"},
	} {
		lx := rs.find(pgHotSection, hotGroup, row.name)
		out = append(out,
			ratioTarget("32", "PostgreSQL hot key, 16 clients, "+row.text+": pglock handoffs/s ≥ 0.9× blocking pg_advisory_lock + nextval", lx, floor, mRate, 0.9,
				func(float64) string { return fmt.Sprintf("pglock p50 wait %s ms", num(med(lx, mP50))) }),
			ceilingTarget("32", "PostgreSQL hot key, 16 clients, "+row.text+": pglock p99 handoff wait ≤ 1.5× blocking pg_advisory_lock + nextval's", lx, floor, mP99, 1.5))
	}
	g32 := groupGoroutines(pgUncontendedNs)
	lx, raw := rs.find(pgSection, g32, namePGLockx), rs.find(pgSection, g32, namePGRaw)
	out = append(out, ratioTarget("32", "PostgreSQL uncontended, 32 goroutines: pglock ≥ 1.2× raw advisory-lock pairs", lx, raw, mRate, 1.2,
		func(float64) string {
			return fmt.Sprintf("pglock p50 %s ms vs raw %s ms", num(med(lx, mP50)), num(med(raw, mP50)))
		}))
	return out
}

// ceilingTarget checks median(a/b per run) ≤ want.
func ceilingTarget(issue, text string, a, b *Result, key string, want float64) target {
	t := target{issue: issue, text: text, status: statusNA}
	v := ratios(a, b, key)
	if len(v) == 0 {
		t.detail = skipReason(a, b)
		return t
	}
	got := median(v)
	t.detail = fmt.Sprintf("%s× (runs %s–%s); %s vs %s", num(got), num(slices.Min(v)), num(slices.Max(v)), num(med(a, key)), num(med(b, key)))
	if got <= want {
		t.status = statusMet
	} else {
		t.status = missed(num(got)+"×", fmt.Sprintf("%s handoffs/s", num(med(a, mRate))))
	}
	return t
}
