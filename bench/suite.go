package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"time"
)

// Case is one row of a table: one library configuration under one workload.
type Case struct {
	Section  string // table the row belongs to (see sections in report.go)
	Group    string // rows divided by one baseline, e.g. "64 goroutines"
	Name     string
	Baseline bool // the row the others of its group are divided by
	Quick    bool // part of -quick
	Once     bool // deterministic: measured in the first run only
	Run      func(ctx context.Context, e *Env, p Params) (Sample, error)
}

// ID names the case for -cases filters: section/group/name.
func (c *Case) ID() string { return c.Section + "/" + c.Group + "/" + c.Name }

// Result holds a case's samples, indexed by run (nil where it did not run),
// and the error that stopped it, if any.
type Result struct {
	Case *Case
	Runs []Sample
	Err  error
}

// Skipped reports whether the case could not run in this build or
// environment.
func (r *Result) Skipped() bool { return errors.Is(r.Err, errSkip) }

// Config is how the suite runs.
type Config struct {
	Params
	Runs   int
	Filter *regexp.Regexp // nil: every case
	Quick  bool
	Log    io.Writer
}

// Cases returns every case in report order.
func Cases() []*Case {
	var cs []*Case
	cs = append(cs, uncontendedCases()...)
	cs = append(cs, batchingCases()...)
	cs = append(cs, pairedUncontendedCases()...)
	cs = append(cs, allocCases()...)
	cs = append(cs, hotKeyCases()...)
	cs = append(cs, localFirstCases()...)
	cs = append(cs, zipfCases()...)
	cs = append(cs, watchdogCases()...)
	cs = append(cs, memoryCases()...)
	cs = append(cs, heldCases()...)
	cs = append(cs, redlockCases()...)
	cs = append(cs, pgCases()...)
	cs = append(cs, zkCases()...)
	cs = append(cs, patternCases()...)
	cs = append(cs, leaderCases()...)
	cs = append(cs, lockxdCases()...)
	cs = append(cs, etcdCases()...)
	return cs
}

// Select returns the cases cfg asks for.
func Select(cfg Config) []*Case {
	var out []*Case
	for _, c := range Cases() {
		if cfg.Quick && !c.Quick {
			continue
		}
		if cfg.Filter != nil && !cfg.Filter.MatchString(c.ID()) {
			continue
		}
		out = append(out, c)
	}
	return out
}

// Run runs the selected cases cfg.Runs times. Runs are the outer loop, so
// every run measures every row once and ratios compare rows measured
// minutes, not a quarter of an hour, apart. The servers are emptied before
// each case. A skipped case is not retried; an interrupted suite returns
// what it has.
func Run(ctx context.Context, e *Env, cases []*Case, cfg Config) []*Result {
	res := make([]*Result, len(cases))
	for i, c := range cases {
		res[i] = &Result{Case: c, Runs: make([]Sample, cfg.Runs)}
	}
	for run := range cfg.Runs {
		for i, c := range cases {
			r := res[i]
			if ctx.Err() != nil || r.Skipped() || (c.Once && run > 0) {
				continue
			}
			if err := e.Reset(ctx); err != nil {
				r.Err = err
				continue
			}
			start := time.Now()
			s, err := c.Run(ctx, e, cfg.Params)
			if ctx.Err() != nil {
				return res
			}
			if err != nil {
				r.Err = err
				fmt.Fprintf(cfg.Log, "run %d/%d  %-70s  %v\n", run+1, cfg.Runs, c.ID(), err)
				continue
			}
			r.Runs[run] = s
			fmt.Fprintf(cfg.Log, "run %d/%d  %-70s  %s  (%.1fs)\n", run+1, cfg.Runs, c.ID(), brief(s), time.Since(start).Seconds())
		}
	}
	return res
}

// brief is a one-line summary of a sample for the progress log.
func brief(s Sample) string {
	out := ""
	for _, k := range []string{mRate, mP50, mP99, mMax, mFails, mRTT, mCmds, "allocs/op", "bytes/lock", "client cpu%", "redis cpu%", "rtt/s", "cmds/s"} {
		if v, ok := s[k]; ok {
			out += fmt.Sprintf("%s=%s ", k, num(v))
		}
	}
	return out
}
