package faults

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// never is the return time of an operation whose outcome is unknown: it may
// take effect at any point after its call.
const never = int64(1) << 62

// histories splits the holders' events into the fenced register's, the
// plain register's and the lock's porcupine histories.
func histories(evs []event) (fenced, plain, mutex []porcupine.Operation) {
	for _, e := range evs {
		switch e.Ev {
		case "op":
			if e.Unknown && !e.Write {
				continue // a read that returned nothing constrains nothing
			}
			op := porcupine.Operation{ClientId: e.Client, Input: RegIn{Write: e.Write, Val: e.Val, Token: e.Token},
				Call: e.Call, Return: e.Ret}
			if e.Write {
				op.Output = RegOut{OK: e.OK, Unknown: e.Unknown}
			} else {
				op.Input = RegIn{}
				op.Output = RegOut{Val: e.Val}
			}
			if e.Unknown {
				op.Return = never
			}
			if e.Reg == "fenced" {
				fenced = append(fenced, op)
			} else {
				plain = append(plain, op)
			}
		case "lock":
			op := porcupine.Operation{ClientId: e.Client, Input: MutexIn{Release: e.Release, Client: e.Client},
				Output: MutexOut{OK: e.OK, Unknown: e.Unknown, Token: e.Token}, Call: e.Call, Return: e.Ret}
			if e.Unknown {
				op.Return = never
			}
			mutex = append(mutex, op)
		}
	}
	return fenced, plain, mutex
}

// staleAccepted counts accepted writes whose token is below one that an
// accepted write had already returned with before they were called.
func staleAccepted(ops []porcupine.Operation) int {
	n := 0
	for _, w := range ops {
		in, out := w.Input.(RegIn), w.Output.(RegOut)
		if !in.Write || !out.OK {
			continue
		}
		for _, p := range ops {
			pin, pout := p.Input.(RegIn), p.Output.(RegOut)
			if pin.Write && pout.OK && p.Return < w.Call && pin.Token > in.Token {
				n++
				break
			}
		}
	}
	return n
}

// leaseEnd is the earliest moment, on the suite's clock, at which the
// lease of holder evs could have expired on the server: the call of the
// last grant or renewal it heard succeed before the instant by, plus the
// lease, less lockx's default drift allowance (WithDrift: 1 % + 2 ms).
// The server applied that call after it was made, so its lease ran at
// least until then.
func leaseEnd(evs []event, lease time.Duration, by int64) (int64, bool) {
	var last int64
	for _, e := range evs {
		granted := e.Ev == "lock" && !e.Release && e.OK
		if (granted || e.Ev == "renew" && e.OK) && e.Call < by {
			last = max(last, e.Call)
		}
	}
	if last == 0 {
		return 0, false
	}
	return last + int64(lease-drift(lease)), true
}

// drift is lockx's default clock-drift allowance for lease (WithDrift).
func drift(lease time.Duration) time.Duration {
	return time.Duration(float64(lease)*0.01) + 2*time.Millisecond
}

// lockMustHold says whether theory says the lock alone (no fencing) must
// keep mutual exclusion through sc's fault: the fault is shorter than the
// lease (the watchdog survives it), or A's grant is refused outright.
func lockMustHold(sc *scenario) bool { return sc.handover == no || sc.refusedA }

// lockProblems lists the lock-level failures of a scenario's runs: a
// second grant during a fault shorter than the lease, a grant before the
// previous holder's lease could have expired where only expiry can free
// it, and a lock history the fenced-mutex model rejects where the lock
// must hold on its own. Elsewhere the model's verdict is only reported.
func lockProblems(sc *scenario, res *result) []string {
	var ps []string
	if res.SecondGrants > 0 {
		ps = append(ps, fmt.Sprintf("lock: B was granted during a fault shorter than the lease in %d/%d runs", res.SecondGrants, res.Runs))
	}
	if sc.byExpiry && res.EarlyGrants > 0 {
		ps = append(ps, fmt.Sprintf("lock: B was granted before A's lease could have expired in %d/%d runs (earliest by %v)", res.EarlyGrants, res.Runs, (-res.Margin).Round(time.Millisecond)))
	}
	if lockMustHold(sc) && res.MutexViolations > 0 {
		ps = append(ps, fmt.Sprintf("lock: %d/%d lock histories fail the fenced-mutex model where the lock alone must hold", res.MutexViolations, res.Runs))
	}
	return ps
}

func linearizable(m porcupine.Model, ops []porcupine.Operation) porcupine.CheckResult {
	return porcupine.CheckOperationsTimeout(m, ops, 10*time.Second)
}

// result is one scenario's row, summed over its iterations.
type result struct {
	Name, Backend, Fault string
	Order                int
	Runs, Ops            int
	StaleFenced          int
	StalePlain           int
	FencedIllegal        int           // runs whose fenced history is not linearizable
	PlainIllegal         int           // runs whose unfenced history is not linearizable
	MutexViolations      int           // runs whose lock history fails the fenced-mutex model
	Handovers            int           // runs in which a second holder got the lock
	SecondGrants         int           // runs with a grant during a fault shorter than the lease
	EarlyGrants          int           // runs whose handover came before A's lease could have expired
	Margin               time.Duration // least (B's grant − earliest end of A's lease) over the runs
	Margined             bool          // Margin was measured (byExpiry scenarios)
	ByExpiry, MustHold   bool          // the scenario's byExpiry and lockMustHold
	Retries              int           // attempts abandoned: A lost the lock before the fault
	Recovery             []time.Duration
	Bound                time.Duration
	ExpectLoss           bool
	Note                 string
}

var (
	resultsMu sync.Mutex
	results   = map[string]*result{}
)

func record(r *result) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	results[r.Name] = r
}

func maxDur(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// mutexCell is the lock-model column: asserted (bold) where the lock alone
// must hold, reported elsewhere.
func mutexCell(r *result) string {
	if r.MustHold {
		return fmt.Sprintf("**%d**/%d", r.MutexViolations, r.Runs)
	}
	return fmt.Sprintf("%d/%d", r.MutexViolations, r.Runs)
}

// marginCell is the least margin between B's grant and the earliest end of
// A's lease, where only the lease's expiry can hand the lock over.
func marginCell(r *result) string {
	switch {
	case !r.ByExpiry:
		return "n/a"
	case !r.Margined:
		return "no handover"
	}
	return fmt.Sprintf("%+v", r.Margin.Round(10*time.Millisecond))
}

// table renders the results as a Markdown table.
func table() string {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	rs := make([]*result, 0, len(results))
	for _, r := range results {
		rs = append(rs, r)
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].Order < rs[j].Order })
	var b strings.Builder
	b.WriteString("| scenario | fault | backend | runs | operations | stale writes accepted, fenced | stale writes accepted, unfenced | register linearizable (fenced / unfenced runs) | lock-model violations | second holder | grant after A's lease end | recovery (median / max, bound) | retried |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | **%d** | %d | %d/%d · %d/%d | %s | %d/%d | %s | %s / %s (≤ %s) | %d |\n",
			r.Name, r.Fault, r.Backend, r.Runs, r.Ops, r.StaleFenced, r.StalePlain,
			r.Runs-r.FencedIllegal, r.Runs, r.Runs-r.PlainIllegal, r.Runs,
			mutexCell(r), r.Handovers, r.Runs, marginCell(r),
			median(r.Recovery).Round(10*time.Millisecond), maxDur(r.Recovery).Round(10*time.Millisecond), r.Bound, r.Retries)
	}
	return b.String()
}
