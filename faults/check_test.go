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
	FencedIllegal        int // runs whose fenced history is not linearizable
	PlainIllegal         int // runs whose unfenced history is not linearizable
	MutexViolations      int // runs whose lock history fails the fenced-mutex model
	Handovers            int // runs in which a second holder got the lock
	Retries              int // attempts abandoned: A lost the lock before the fault
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
	b.WriteString("| scenario | fault | backend | runs | operations | stale writes accepted, fenced | stale writes accepted, unfenced | register linearizable (fenced / unfenced runs) | lock-model violations | second holder | recovery (median / max, bound) | retried |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | **%d** | %d | %d/%d · %d/%d | %d/%d | %d/%d | %s / %s (≤ %s) | %d |\n",
			r.Name, r.Fault, r.Backend, r.Runs, r.Ops, r.StaleFenced, r.StalePlain,
			r.Runs-r.FencedIllegal, r.Runs, r.Runs-r.PlainIllegal, r.Runs,
			r.MutexViolations, r.Runs, r.Handovers, r.Runs,
			median(r.Recovery).Round(10*time.Millisecond), maxDur(r.Recovery).Round(10*time.Millisecond), r.Bound, r.Retries)
	}
	return b.String()
}
