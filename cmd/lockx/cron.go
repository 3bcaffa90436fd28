package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/patterns/cronguard"
)

// cronRun is the JSON form of a cronguard run.
type cronRun struct {
	Job        string    `json:"job"`
	Trigger    time.Time `json:"trigger"`
	Instance   string    `json:"instance"`
	Token      uint64    `json:"token"`
	Started    time.Time `json:"started"`
	DurationMs int64     `json:"duration_ms"`
	Error      string    `json:"error,omitempty"`
	Lost       bool      `json:"lost,omitempty"`
}

// cron prints the last runs of job from the records a cronguard
// BackendStore keeps in the backend's result store. The store finds
// records by walking the job's schedule back from now, so the schedule
// must be given (--every, as the job's cronguard.Every).
func (c *cli) cron(ctx context.Context, b driver.Backend, job string) int {
	var rs driver.ResultStore
	ok := driver.As(b, &rs)
	if !ok {
		fmt.Fprintln(c.errOut, "lockx: the backend keeps no result store: no cron records")
		return exitUnsupported
	}
	if c.opts.every <= 0 {
		fmt.Fprintln(c.errOut, "lockx: cron needs --every, the job's interval")
		return exitUsage
	}
	store, err := cronguard.NewBackendStore(rs, c.opts.retention)
	if err != nil {
		fmt.Fprintln(c.errOut, "lockx:", err)
		return exitUsage
	}
	locks := lockx.New(noClose{b})
	defer locks.Close()
	cl, err := cronguard.NewClaimer(locks, job, cronguard.Every(c.opts.every), cronguard.WithStore(store))
	if err != nil {
		fmt.Fprintln(c.errOut, "lockx:", err)
		return exitUsage
	}
	cctx, cancel := context.WithTimeout(ctx, c.opts.timeout)
	defer cancel()
	runs, err := cl.LastRuns(cctx, c.opts.runs)
	if err != nil {
		return c.fail(err)
	}
	if c.opts.json {
		out := make([]cronRun, 0, len(runs))
		for _, r := range runs {
			out = append(out, cronRun{Job: r.Job, Trigger: r.Trigger.UTC(), Instance: r.Instance, Token: uint64(r.Token),
				Started: r.Started.UTC(), DurationMs: r.Duration.Milliseconds(), Error: r.Error, Lost: r.Lost})
		}
		return c.printJSON(out)
	}
	tw := tabwriter.NewWriter(c.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TRIGGER\tINSTANCE\tTOKEN\tDURATION\tRESULT")
	for _, r := range runs {
		result := "ok"
		switch {
		case r.Lost:
			result = "lost"
		case r.Error != "":
			result = "error: " + r.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", r.Trigger.UTC().Format(time.RFC3339), r.Instance, r.Token, r.Duration.Round(time.Millisecond), result)
	}
	_ = tw.Flush()
	if len(runs) == 0 {
		fmt.Fprintf(c.errOut, "lockx: no runs of %q recorded within --retention\n", job)
		return exitNotHeld
	}
	return exitOK
}

// noClose keeps the temporary client from closing the CLI's backend. It
// changes nothing else, so it is transparent to driver.As (Unwrap): the
// guard finds the backend's clock and result store through it.
type noClose struct{ driver.Backend }

func (noClose) Close() error { return nil }

// Unwrap returns the wrapped backend, for driver.As.
func (n noClose) Unwrap() driver.Backend { return n.Backend }
