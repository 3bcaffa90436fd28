// Command lockxbench runs lockx's benchmarks next to its peers and the raw
// baselines, prints the tables and rewrites docs/benchmarks.md.
//
//	cd bench && go run ./cmd/lockxbench            # the full suite (make bench)
//	cd bench && go run ./cmd/lockxbench -quick     # smoke test, under a minute
//	cd bench && go run ./cmd/lockxbench -cases 'hotkey/'
//
// It starts its own redis-server(s) on free ports of 7900–7999 and stops
// them by pid at exit, also on Ctrl-C; PostgreSQL is the local one (-pg).
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lockx-go/lockx/bench"
)

func main() {
	os.Exit(run())
}

func run() int {
	var (
		duration = flag.Duration("duration", 5*time.Second, "measured time per case and run")
		warmup   = flag.Duration("warmup", 500*time.Millisecond, "warm-up per case and run, not measured")
		runs     = flag.Int("runs", 3, "runs of every case (ratios are computed within a run)")
		cases    = flag.String("cases", "", "regexp on section/group/name selecting the cases (see -list)")
		out      = flag.String("out", "../docs/benchmarks.md", "report to rewrite; plots go to img/ beside it; empty: print only")
		quick    = flag.Bool("quick", false, "smoke test: a subset, 1 run of 1 s, report printed but not written unless -out is given")
		list     = flag.Bool("list", false, "list the cases and exit")
		pgURL    = flag.String("pg", "postgres://postgres@127.0.0.1:5432/test", "PostgreSQL connection URL")
	)
	flag.Parse()
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })

	cfg := bench.Config{Params: bench.Params{Warmup: *warmup, Duration: *duration}, Runs: *runs, Quick: *quick, Log: os.Stderr}
	if *quick {
		cfg.Runs = 1
		cfg.Params.Quick = true
		if !set["duration"] {
			cfg.Duration = time.Second
		}
		if !set["warmup"] {
			cfg.Warmup = 200 * time.Millisecond
		}
		if !set["out"] {
			*out = ""
		}
		bench.SetBenchTime(300 * time.Millisecond)
	}
	if cfg.Runs < 1 {
		fmt.Fprintln(os.Stderr, "lockxbench: -runs must be at least 1")
		return 2
	}
	if *cases != "" {
		re, err := regexp.Compile(*cases)
		if err != nil {
			fmt.Fprintln(os.Stderr, "lockxbench: -cases:", err)
			return 2
		}
		cfg.Filter = re
	}
	selected := bench.Select(cfg)
	if *list {
		for _, c := range selected {
			fmt.Println(c.ID())
		}
		return 0
	}
	if len(selected) == 0 {
		fmt.Fprintln(os.Stderr, "lockxbench: no case matches")
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env := bench.NewEnv(*pgURL)
	defer env.Close()
	if _, err := env.Addr(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "lockxbench:", err)
		return 1
	}

	meta := bench.Meta{
		Command:   command(),
		Started:   time.Now(),
		LoadStart: bench.LoadAvg(),
		Machine:   bench.Machine(),
		Versions:  bench.Versions(ctx, env),
		Config:    cfg,
	}
	fmt.Fprintf(os.Stderr, "lockxbench: %d cases × %d runs, %v + %v each\n", len(selected), cfg.Runs, cfg.Warmup, cfg.Duration)
	results := bench.Run(ctx, env, selected, cfg)
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "lockxbench: interrupted; no report written")
		return 130
	}
	meta.Ended = time.Now()
	meta.LoadEnd = bench.LoadAvg()
	meta.Notes = []string{
		"Client and servers share this machine's CPUs; other work on the machine moves the figures, so compare rows of one report, not figures across reports.",
	}
	if l := max(load1(meta.LoadStart), load1(meta.LoadEnd)); l > 0.5*float64(runtime.NumCPU()) {
		meta.Notes = append(meta.Notes, fmt.Sprintf("The machine was busy with other work during this run (1-minute load average up to %.1f on %d CPUs): the figures are provisional; ratios within one run are the more robust reading.", l, runtime.NumCPU()))
	}
	if *quick {
		meta.Notes = append(meta.Notes, "-quick: a subset of the cases, one short run: a smoke test, not a measurement.")
	}

	if *out != "" {
		plots, err := bench.WritePlots(results, filepath.Join(filepath.Dir(*out), "img"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "lockxbench: plots:", err)
		}
		for _, p := range plots {
			meta.Plots = append(meta.Plots, "img/"+p)
		}
	}
	var buf bytes.Buffer
	bench.WriteReport(&buf, meta, results)
	os.Stdout.Write(buf.Bytes())
	if *out != "" {
		if err := os.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "lockxbench:", err)
			return 1
		}
		fmt.Fprintln(os.Stderr, "lockxbench: wrote", *out)
	}
	return 0
}

// load1 parses the 1-minute figure of bench.LoadAvg's "a / b / c".
func load1(s string) float64 {
	f, _ := strconv.ParseFloat(strings.Fields(s + " x")[0], 64)
	return f
}

// command is the command line that reproduces this run.
func command() string {
	args := []string{"cd bench && go run ./cmd/lockxbench"}
	for _, a := range os.Args[1:] {
		if strings.ContainsAny(a, " '\"*|()[]$") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		args = append(args, a)
	}
	return strings.Join(args, " ")
}
