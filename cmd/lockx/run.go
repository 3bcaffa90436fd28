package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/lockx-go/lockx/internal/redisurl"
	"github.com/lockx-go/lockx/internal/wallclock"
	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/driver"
	"github.com/lockx-go/lockx/lockx/pglock"
	"github.com/lockx-go/lockx/lockx/redislock"
	"github.com/lockx-go/lockx/lockx/zklock"
)

// Exit codes, documented in the package comment.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitNotHeld     = 3
	exitAborted     = 4
	exitUnsupported = 5
)

type options struct {
	redisURL, postgresURL string
	zookeeper, zkRoot     string
	prefix                string
	schema, namespace     string
	json, yes, watch      bool
	interval, long        time.Duration
	count                 int
	timeout               time.Duration
	every, retention      time.Duration
	runs                  int
	reason, auditFile     string
}

type cli struct {
	cmd    string // the command run, named in its errors
	opts   options
	in     *bufio.Reader
	out    io.Writer
	errOut io.Writer
	now    func() time.Time
}

func usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprint(w, `usage: lockx [flags] COMMAND [ARG]

commands:
  ls [PREFIX]         list held locks
  inspect KEY         show one lock
  watch [PREFIX]      live view, refreshed every --interval
  force-unlock KEY    evict KEY's holder, fence it off, wake waiters
  cron JOB            last runs of a cronguard job (needs --every)
  leader NAME         who leads the election NAME (patterns/leader); --watch follows changes

flags:
`)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fmt.Fprint(w, `
exit codes: 0 ok, 1 backend failed, 2 usage, 3 not held, 4 not confirmed, 5 unsupported
`)
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	c := &cli{in: bufio.NewReader(stdin), out: stdout, errOut: stderr, now: wallclock.Now}
	fs := flag.NewFlagSet("lockx", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := &c.opts
	fs.StringVar(&o.redisURL, "redis", getenv("LOCKX_REDIS_URL"), "Redis `URL`, redis://[[user]:password@]host:port[/db] or rediss:// for TLS;\nhost:port alone means redis://host:port; several, comma-separated: a Redlock quorum\nof independent nodes (env LOCKX_REDIS_URL)")
	fs.StringVar(&o.postgresURL, "postgres", getenv("LOCKX_POSTGRES_URL"), "PostgreSQL `URL` (env LOCKX_POSTGRES_URL)")
	fs.StringVar(&o.zookeeper, "zookeeper", getenv("LOCKX_ZOOKEEPER"), "ZooKeeper `servers`, host:port,... (env LOCKX_ZOOKEEPER)")
	fs.StringVar(&o.zkRoot, "zkroot", zklock.DefaultRoot, "ZooKeeper root znode of the backend")
	fs.StringVar(&o.prefix, "prefix", "lockx:", "Redis key prefix of the backend")
	fs.StringVar(&o.schema, "schema", pglock.DefaultSchema, "PostgreSQL schema of the backend")
	fs.StringVar(&o.namespace, "namespace", pglock.DefaultNamespace, "PostgreSQL key namespace of the backend")
	fs.BoolVar(&o.json, "json", false, "print JSON")
	fs.BoolVar(&o.yes, "yes", false, "force-unlock without asking")
	fs.StringVar(&o.reason, "reason", "", "force-unlock: why the holder is evicted (required; recorded)")
	fs.StringVar(&o.auditFile, "audit-file", defaultAuditFile(getenv), "force-unlock: append the audit record to this `file` (env LOCKX_AUDIT_FILE)")
	fs.DurationVar(&o.interval, "interval", time.Second, "watch: refresh period")
	fs.DurationVar(&o.long, "long", 0, "watch: flag holders older than this (0: off)")
	fs.IntVar(&o.count, "count", 0, "watch: stop after this many refreshes (0: until interrupted)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "timeout of each backend call")
	fs.DurationVar(&o.every, "every", 0, "cron: the job's interval (cronguard.Every)")
	fs.DurationVar(&o.retention, "retention", 7*24*time.Hour, "cron: how far back to look")
	fs.IntVar(&o.runs, "runs", 10, "cron: how many runs to show")
	fs.BoolVar(&o.watch, "watch", false, "leader: follow changes (until interrupted, or --count changes)")
	// A usage error is one line and a pointer to --help: the full usage
	// would bury the line that says what is wrong.
	bad := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "lockx: "+format+"\n", a...)
		fmt.Fprintln(stderr, helpHint)
		return exitUsage
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout, fs)
			return exitOK
		}
		return bad("%s", flagError(err))
	}
	// Flags may also follow the command and its argument.
	var rest []string
	for args := fs.Args(); len(args) > 0; args = fs.Args() {
		rest = append(rest, args[0])
		if err := fs.Parse(args[1:]); err != nil {
			return bad("%s", flagError(err))
		}
	}
	if len(rest) == 0 {
		usage(stderr, fs)
		return exitUsage
	}
	cmd, rest := rest[0], rest[1:]
	spec, ok := commands[cmd]
	switch {
	case !ok:
		return bad("unknown command %q (commands: ls, inspect, watch, force-unlock, cron, leader)", cmd)
	case spec.arg != "" && spec.required && len(rest) == 0:
		return bad("%s: missing %s (%s)", cmd, spec.arg, spec.what)
	case len(rest) > 1 || len(rest) == 1 && spec.arg == "":
		return bad("%s: unexpected argument %q (usage: lockx %s)", cmd, rest[len(rest)-1], strings.TrimSpace(cmd+" "+spec.usage()))
	}
	if given := btoi(o.redisURL != "") + btoi(o.postgresURL != "") + btoi(o.zookeeper != ""); given != 1 {
		return bad("give exactly one of --redis, --postgres and --zookeeper (or LOCKX_REDIS_URL / LOCKX_POSTGRES_URL / LOCKX_ZOOKEEPER)")
	}
	// Only lockx speaks on stderr: go-redis would log its pool's dial
	// failures there, repeating what the error below says.
	redis.SetLogger(silentRedisLogger{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	b, closeFn, err := c.connect(ctx)
	if err != nil {
		return bad("%s", err)
	}
	defer closeFn()
	arg := ""
	if len(rest) > 0 {
		arg = rest[0]
	}
	c.cmd = cmd
	switch cmd {
	case "ls":
		return c.ls(ctx, b, arg)
	case "inspect":
		return c.inspect(ctx, b, arg)
	case "watch":
		return c.watch(ctx, b, arg)
	case "cron":
		return c.cron(ctx, b, arg)
	case "leader":
		return c.leader(ctx, b, arg)
	default:
		return c.forceUnlock(ctx, b, arg)
	}
}

// helpHint follows every usage error.
const helpHint = "run 'lockx --help' for usage"

// command describes a command's argument, for the usage errors.
type command struct {
	arg      string // the argument's name, "" if it takes none
	required bool
	what     string // what the argument is, for "missing ARG (what)"
}

func (c command) usage() string {
	switch {
	case c.arg == "":
		return ""
	case c.required:
		return c.arg
	}
	return "[" + c.arg + "]"
}

var commands = map[string]command{
	"ls":           {arg: "PREFIX", what: "list the locks whose keys start with it"},
	"inspect":      {arg: "KEY", required: true, what: "the key of the lock to show"},
	"watch":        {arg: "PREFIX", what: "watch the locks whose keys start with it"},
	"force-unlock": {arg: "KEY", required: true, what: "the key of the lock to evict"},
	"cron":         {arg: "JOB", required: true, what: "the cronguard job whose runs to show"},
	"leader":       {arg: "NAME", required: true, what: "the leader election to show"},
}

// flagError rewords the flag package's errors, which name flags with one
// dash although the usage shows two.
func flagError(err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return fmt.Sprintf("unknown flag --%s", name)
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return fmt.Sprintf("flag --%s needs a value", name)
	}
	return strings.Replace(msg, "for flag -", "for flag --", 1)
}

// silentRedisLogger drops go-redis's internal log lines.
type silentRedisLogger struct{}

func (silentRedisLogger) Printf(context.Context, string, ...any) {}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// connect opens the backend; closeFn closes it and its client.
func (c *cli) connect(ctx context.Context) (driver.Backend, func(), error) {
	if z := c.opts.zookeeper; z != "" {
		dctx, cancel := context.WithTimeout(ctx, c.opts.timeout)
		defer cancel()
		b, err := zklock.Dial(dctx, strings.Split(z, ","), zklock.WithRoot(c.opts.zkRoot))
		if err != nil {
			return nil, nil, fmt.Errorf("--zookeeper: %w", err)
		}
		return b, func() { _ = b.Close() }, nil
	}
	if u := c.opts.redisURL; u != "" {
		var rdbs []redis.UniversalClient
		closeAll := func() {
			for _, rdb := range rdbs {
				_ = rdb.Close()
			}
		}
		for _, u := range strings.Split(u, ",") {
			ro, err := redisurl.Parse("--redis", u)
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			ro.MaxRetries = -1
			rdbs = append(rdbs, redis.NewClient(ro))
		}
		var b driver.Backend
		if len(rdbs) == 1 {
			b = redislock.New(rdbs[0], redislock.WithPrefix(c.opts.prefix))
		} else {
			// Several independent nodes: a Redlock quorum. Each node may take
			// up to a second to answer (the first call dials): an operator's
			// read, not a lock on a hot path with a lease to keep.
			nodeTimeout := time.Second
			if t := c.opts.timeout; t > 0 && t < nodeTimeout {
				nodeTimeout = t
			}
			b = redislock.NewQuorum(rdbs, redislock.WithPrefix(c.opts.prefix), redislock.WithNodeTimeout(nodeTimeout))
		}
		return b, func() { _ = b.Close(); closeAll() }, nil
	}
	cfg, err := pgxpool.ParseConfig(c.opts.postgresURL)
	if err != nil {
		return nil, nil, fmt.Errorf("--postgres: %w", err)
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("--postgres: %w", err)
	}
	b := pglock.New(pool, pglock.WithSchema(c.opts.schema), pglock.WithNamespace(c.opts.namespace), pglock.WithoutAutoMigrate())
	return b, func() { _ = b.Close(); pool.Close() }, nil
}

// fail prints err, prefixed with the command that met it, and returns its
// exit code.
func (c *cli) fail(err error) int {
	fmt.Fprintf(c.errOut, "lockx: %s: %s\n", c.cmd, strings.ReplaceAll(err.Error(), "lockx: ", ""))
	switch {
	case errors.Is(err, lockx.ErrNoInspector):
		return exitUnsupported
	case errors.Is(err, lockx.ErrNotHeld):
		return exitNotHeld
	}
	return exitFailed
}

func (c *cli) inspector(b driver.Backend) (driver.Inspector, int) {
	var in driver.Inspector
	ok := driver.As(b, &in)
	if !ok {
		return nil, c.fail(lockx.ErrNoInspector)
	}
	return in, exitOK
}

func (c *cli) list(ctx context.Context, in driver.Inspector, prefix string) ([]lockx.LockInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.timeout)
	defer cancel()
	var out []lockx.LockInfo
	err := in.Locks(ctx, prefix, func(li lockx.LockInfo) bool { out = append(out, li); return true })
	sortInfos(out)
	return out, err
}

func (c *cli) ls(ctx context.Context, b driver.Backend, prefix string) int {
	in, code := c.inspector(b)
	if in == nil {
		return code
	}
	infos, err := c.list(ctx, in, prefix)
	if err != nil {
		return c.fail(err)
	}
	if c.opts.json {
		return c.printJSON(jsonInfos(infos, nil))
	}
	c.table(infos, nil)
	return exitOK
}

func (c *cli) inspect(ctx context.Context, b driver.Backend, key string) int {
	in, code := c.inspector(b)
	if in == nil {
		return code
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.timeout)
	defer cancel()
	li, err := in.Lock(ctx, key)
	if err != nil {
		return c.fail(fmt.Errorf("%q: %w", key, err))
	}
	if c.opts.json {
		return c.printJSON(toJSON(li, false))
	}
	c.detail(li)
	return exitOK
}

func (c *cli) watch(ctx context.Context, b driver.Backend, prefix string) int {
	in, code := c.inspector(b)
	if in == nil {
		return code
	}
	type hold struct {
		key   string
		token lockx.Token
	}
	firstSeen := map[hold]time.Time{}
	t := time.NewTicker(c.opts.interval)
	defer t.Stop()
	for i := 0; c.opts.count == 0 || i < c.opts.count; i++ {
		if i > 0 {
			select {
			case <-ctx.Done():
				return exitOK
			case <-t.C:
			}
		}
		infos, err := c.list(ctx, in, prefix)
		if err != nil {
			if ctx.Err() != nil {
				return exitOK
			}
			return c.fail(err)
		}
		now := c.now()
		seen := map[hold]bool{}
		long := map[string]bool{}
		for j, li := range infos {
			h := hold{li.Key, li.Token}
			seen[h] = true
			if _, ok := firstSeen[h]; !ok {
				firstSeen[h] = now.Add(-li.Age)
			}
			if li.Age == 0 && i > 0 {
				infos[j].Age = now.Sub(firstSeen[h]) // at least this old
			}
			if c.opts.long > 0 && infos[j].Age >= c.opts.long {
				long[li.Key] = true
			}
		}
		for h := range firstSeen {
			if !seen[h] {
				delete(firstSeen, h)
			}
		}
		if c.opts.json {
			if code := c.printJSON(jsonInfos(infos, long)); code != exitOK {
				return code
			}
			continue
		}
		fmt.Fprintf(c.out, "%s  %d held\n", now.UTC().Format(time.RFC3339), len(infos))
		c.table(infos, long)
		fmt.Fprintln(c.out)
	}
	return exitOK
}

// auditRecord is what force-unlock records and prints: one JSON line per
// eviction in the audit file (docs/operations.md).
type auditRecord struct {
	Action string    `json:"action"`
	Key    string    `json:"key"`
	Owner  string    `json:"owner"`
	Token  uint64    `json:"token"`
	Reason string    `json:"reason"`
	By     string    `json:"by"`      // os_user@host
	OSUser string    `json:"os_user"` // from the process's uid, not $USER
	UID    string    `json:"uid"`
	Host   string    `json:"host"`
	PID    int       `json:"pid"`
	At     time.Time `json:"at"`
	// Fenced says whether the backend recorded the evicted token + 1 as
	// seen for the key (it has a fence store); FencedTo is that value.
	Fenced   bool   `json:"fenced"`
	FencedTo uint64 `json:"fenced_to,omitempty"`
	Audit    string `json:"audit,omitempty"` // result-store key of a copy in the backend
}

// defaultAuditFile is $LOCKX_AUDIT_FILE, else lockx/audit.jsonl under the
// user's state directory ($XDG_STATE_HOME, else ~/.local/state).
func defaultAuditFile(getenv func(string) string) string {
	if f := getenv("LOCKX_AUDIT_FILE"); f != "" {
		return f
	}
	dir := getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "lockx", "audit.jsonl")
}

// openAudit opens the audit file for appending, creating it (0600) and
// its directory (0700) if needed.
func openAudit(path string) (*os.File, error) {
	if path == "" {
		return nil, errors.New("no audit file: set --audit-file or LOCKX_AUDIT_FILE")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
}

func (c *cli) forceUnlock(ctx context.Context, b driver.Backend, key string) int {
	if strings.TrimSpace(c.opts.reason) == "" {
		fmt.Fprintln(c.errOut, "lockx: force-unlock needs --reason (why the holder is evicted; it goes into the audit record)")
		fmt.Fprintln(c.errOut, helpHint)
		return exitUsage
	}
	in, code := c.inspector(b)
	if in == nil {
		return code
	}
	// The record's file is opened before anything is done: an eviction
	// that cannot be recorded does not happen.
	af, err := openAudit(c.opts.auditFile)
	if err != nil {
		return c.fail(fmt.Errorf("audit record cannot be written, nothing done: %w", err))
	}
	defer af.Close()
	cctx, cancel := context.WithTimeout(ctx, c.opts.timeout)
	li, err := in.Lock(cctx, key)
	cancel()
	if err != nil {
		return c.fail(fmt.Errorf("%q: %w", key, err))
	}
	if !c.opts.yes {
		fmt.Fprintf(c.errOut, "force-unlock %q held by %s (token %d, ttl %s)?\n", key, li.Owner, li.Token, fmtDur(li.TTL))
		fmt.Fprint(c.errOut, "The holder may still be running. Type the key to confirm: ")
		answer, _ := c.in.ReadString('\n')
		if strings.TrimRight(answer, "\r\n") != key {
			fmt.Fprintln(c.errOut, "lockx: not confirmed; nothing done")
			return exitAborted
		}
	}
	cctx, cancel = context.WithTimeout(ctx, c.opts.timeout)
	defer cancel()
	evicted, err := lockx.ForceUnlock(cctx, b, key)
	if err != nil {
		return c.fail(err)
	}
	if evicted.Token != li.Token {
		// The holder changed between the confirmation and the eviction:
		// ForceUnlock evicted whoever held it then. Say so.
		fmt.Fprintf(c.errOut, "lockx: note: the holder changed after confirmation; evicted token %d\n", evicted.Token)
	}
	rec := auditRecord{Action: "force-unlock", Key: key, Owner: string(evicted.Owner), Token: uint64(evicted.Token),
		Reason: c.opts.reason, PID: os.Getpid(), At: c.now().UTC()}
	rec.OSUser, rec.UID, rec.Host = osIdentity()
	rec.By = rec.OSUser + "@" + rec.Host
	// ForceUnlock raises the fence exactly when the backend keeps fences
	// and the token can be raised (lockx/inspect.go).
	if driver.As(b, new(driver.FenceStore)) && evicted.Token > 0 && evicted.Token < lockx.MaxToken {
		rec.Fenced, rec.FencedTo = true, uint64(evicted.Token)+1
	}
	var rs driver.ResultStore
	if driver.As(b, &rs) {
		akey := fmt.Sprintf("lockx-audit/force-unlock/%s/%d", key, rec.At.UnixNano())
		val, _ := json.Marshal(rec)
		if _, _, err := rs.SaveResult(cctx, akey, driver.Outcome{Value: val, Created: rec.At}, 90*24*time.Hour); err != nil {
			fmt.Fprintln(c.errOut, "lockx: warning: copy of the audit record not stored in the backend:", err)
		} else {
			rec.Audit = akey
		}
	}
	line, _ := json.Marshal(rec)
	_, err = af.Write(append(line, '\n'))
	if err == nil {
		err = af.Sync()
	}
	if err != nil {
		// The eviction happened: say so, and that its record is missing.
		fmt.Fprintf(c.errOut, "lockx: evicted %s but the audit record was not written to %s: %v\n%s\n", key, c.opts.auditFile, err, line)
		return exitFailed
	}
	if c.opts.json {
		return c.printJSON(rec)
	}
	fmt.Fprintf(c.out, "evicted %s (owner %s, token %d); ", key, rec.Owner, rec.Token)
	if rec.Fenced {
		fmt.Fprintf(c.out, "fence raised to %d", rec.FencedTo)
	} else {
		fmt.Fprint(c.out, "not fenced: this backend keeps no fences, so the evicted holder's writes are not refused by lockx")
	}
	fmt.Fprintf(c.out, "; released as its owner\nrecorded: %s by %s at %s, reason %q, in %s", key, rec.By, rec.At.Format(time.RFC3339), rec.Reason, c.opts.auditFile)
	if rec.Audit != "" {
		fmt.Fprintf(c.out, " and in the backend as %s", rec.Audit)
	}
	fmt.Fprintln(c.out)
	return exitOK
}

// osIdentity is the process's user, from its uid (not $USER or $LOGNAME,
// which the caller sets), and the host name.
func osIdentity() (name, uid, host string) {
	name, uid = "unknown", strconv.Itoa(os.Getuid())
	if u, err := user.LookupId(uid); err == nil {
		name = u.Username
	}
	host, _ = os.Hostname()
	return name, uid, host
}

// jsonInfo is the JSON form of a lock.
type jsonInfo struct {
	Key     string `json:"key"`
	Owner   string `json:"owner"`
	Token   uint64 `json:"token"`
	TTLms   int64  `json:"ttl_ms"`
	AgeMs   int64  `json:"age_ms"`
	Waiters int    `json:"waiters"`
	Long    bool   `json:"long,omitempty"`
}

func toJSON(li lockx.LockInfo, long bool) jsonInfo {
	return jsonInfo{Key: li.Key, Owner: string(li.Owner), Token: uint64(li.Token), TTLms: li.TTL.Milliseconds(),
		AgeMs: li.Age.Milliseconds(), Waiters: li.Waiters, Long: long}
}

func jsonInfos(infos []lockx.LockInfo, long map[string]bool) []jsonInfo {
	out := make([]jsonInfo, 0, len(infos))
	for _, li := range infos {
		out = append(out, toJSON(li, long[li.Key]))
	}
	return out
}

func (c *cli) printJSON(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprintln(c.out, string(b))
	return exitOK
}

func (c *cli) table(infos []lockx.LockInfo, long map[string]bool) {
	tw := tabwriter.NewWriter(c.out, 0, 0, 2, ' ', 0)
	fmt.Fprint(tw, "KEY\tOWNER\tTOKEN\tTTL\tAGE\tWAITERS")
	if c.opts.long > 0 {
		fmt.Fprint(tw, "\tLONG")
	}
	fmt.Fprintln(tw)
	for _, li := range infos {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s", li.Key, li.Owner, li.Token, fmtDur(li.TTL), fmtDur(li.Age), fmtWaiters(li.Waiters))
		if c.opts.long > 0 {
			mark := "-"
			if long[li.Key] {
				mark = "yes"
			}
			fmt.Fprint(tw, "\t"+mark)
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
}

func (c *cli) detail(li lockx.LockInfo) {
	tw := tabwriter.NewWriter(c.out, 0, 0, 1, ' ', 0)
	fmt.Fprintf(tw, "key:\t%s\nowner:\t%s\ntoken:\t%d\nttl:\t%s\nage:\t%s\nwaiters:\t%s\n",
		li.Key, li.Owner, li.Token, fmtDur(li.TTL), fmtDur(li.Age), fmtWaiters(li.Waiters))
	_ = tw.Flush()
}

// fmtDur prints whole seconds (fixed width for a given magnitude), or "-"
// for unknown.
func fmtDur(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return fmt.Sprintf("%ds", int64(d.Round(time.Second)/time.Second))
}

func fmtWaiters(n int) string {
	if n < 0 {
		return "?"
	}
	return fmt.Sprint(n)
}
