package shop

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// LoadConfig configures a flash sale run by the load generator.
type LoadConfig struct {
	Targets     []string      // base URLs of the replicas; buyers spread over them
	SKU         string        // product to buy (default "phone")
	Buyers      int           // distinct buyers, one unit each (default 2000)
	Concurrency int           // buyers in flight at once (default 64)
	LostReply   float64       // share of answered buyers that resend the same Idempotency-Key (0: 0.2, <0: none)
	Abandon     float64       // share of buyers that reserve and never pay (0: 0.02, <0: none)
	Hold        time.Duration // their hold (default 1 s)
	Restock     int64         // units an admin adds mid-sale, racing a stale admin (0: no admin)
	Progress    io.Writer     // progress and report; nil: silent. A terminal gets a live bar, anything else a line a second
	Settle      time.Duration // how long to wait for reservations to expire (default 10 s)
}

// Report is the outcome of a sale.
type Report struct {
	Replicas       int           `json:"replicas"`
	Buyers         int           `json:"buyers"`
	Supplied       int64         `json:"supplied"`          // initial stock + restocks
	Sold           int64         `json:"sold"`              // units of paid orders (stock ledger)
	Left           int64         `json:"left"`              // units available after the sale
	Reserved       int64         `json:"reserved"`          // reservations still open at the end
	PaidOrders     int           `json:"paid_orders"`       // distinct paid order IDs the buyers received
	Oversold       int64         `json:"oversold"`          // must be 0
	Duplicates     int           `json:"duplicate_charges"` // must be 0
	Balanced       bool          `json:"balanced"`          // stock ledger reconciles
	Requests       int64         `json:"requests"`
	Replayed       int64         `json:"replayed"` // answers replayed for a resent Idempotency-Key
	Retries        int64         `json:"retries"`  // resends after 409 in progress, 503 or a network error
	SoldOut        int64         `json:"sold_out_answers"`
	Errors         int64         `json:"errors"` // buyers that gave up
	Abandoned      int64         `json:"abandoned_reservations"`
	ExpiredUnits   int64         `json:"expired_units"`
	CronRuns       int64         `json:"cron_runs"`
	DupCronRuns    int           `json:"duplicate_cron_runs"` // must be 0
	StaleRejected  int64         `json:"stale_writes_rejected"`
	Restocks       int64         `json:"restocks"`
	P50            time.Duration `json:"-"` // in the JSON as p50_ms
	P99            time.Duration `json:"-"` // in the JSON as p99_ms
	Elapsed        time.Duration `json:"-"` // in the JSON as elapsed_ms
	OrdersPerSec   float64       `json:"orders_per_second"`
	StaleAdminSeen bool          `json:"stale_admin_refused"` // the late admin's write got 409
}

// MarshalJSON writes the report with its durations in milliseconds, as
// everywhere in the service's JSON.
func (r Report) MarshalJSON() ([]byte, error) {
	type plain Report
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return json.Marshal(struct {
		plain
		P50ms     float64 `json:"p50_ms"`
		P99ms     float64 `json:"p99_ms"`
		ElapsedMs float64 `json:"elapsed_ms"`
	}{plain(r), ms(r.P50), ms(r.P99), ms(r.Elapsed)})
}

// Check returns the violated invariants, nil if none.
func (r Report) Check() error {
	var errs []error
	if r.Oversold != 0 {
		errs = append(errs, fmt.Errorf("oversold %d", r.Oversold))
	}
	if r.Duplicates != 0 {
		errs = append(errs, fmt.Errorf("%d duplicate charges", r.Duplicates))
	}
	if !r.Balanced {
		errs = append(errs, errors.New("stock ledger does not reconcile"))
	}
	if r.Sold+r.Left+r.Reserved != r.Supplied {
		errs = append(errs, fmt.Errorf("sold %d + left %d + reserved %d != supplied %d", r.Sold, r.Left, r.Reserved, r.Supplied))
	}
	if int64(r.PaidOrders) != r.Sold {
		errs = append(errs, fmt.Errorf("buyers hold %d paid orders, the ledger sold %d units", r.PaidOrders, r.Sold))
	}
	if r.DupCronRuns != 0 {
		errs = append(errs, fmt.Errorf("%d expiry-job triggers ran twice", r.DupCronRuns))
	}
	if r.Errors != 0 {
		errs = append(errs, fmt.Errorf("%d buyers gave up", r.Errors))
	}
	return errors.Join(errs...)
}

// Print writes the report.
func (r Report) Print(w io.Writer) {
	ok := "OK"
	if err := r.Check(); err != nil {
		ok = "FAILED: " + err.Error()
	}
	fmt.Fprintf(w, "seckill: %d buyers on %d replica(s) in %v\n", r.Buyers, r.Replicas, r.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "  sold %d, left %d, reserved %d of %d supplied (restocks %d)\n", r.Sold, r.Left, r.Reserved, r.Supplied, r.Restocks)
	fmt.Fprintf(w, "  oversold %d, duplicate charges %d, ledger balanced %v, expiry-job triggers run twice %d\n", r.Oversold, r.Duplicates, r.Balanced, r.DupCronRuns)
	fmt.Fprintf(w, "  requests %d (replayed %d, retried %d, sold-out answers %d), buyers gave up %d\n", r.Requests, r.Replayed, r.Retries, r.SoldOut, r.Errors)
	fmt.Fprintf(w, "  abandoned reservations %d, units returned by the expiry job %d in %d runs\n", r.Abandoned, r.ExpiredUnits, r.CronRuns)
	fmt.Fprintf(w, "  stale admin writes rejected %d (late admin refused: %v)\n", r.StaleRejected, r.StaleAdminSeen)
	fmt.Fprintf(w, "  latency p50 %v, p99 %v; %.0f orders/s\n", r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond), r.OrdersPerSec)
	fmt.Fprintf(w, "  invariants: %s\n", ok)
}

type loadRun struct {
	cfg    LoadConfig
	client *http.Client
	runID  string

	mu        sync.Mutex
	latencies []time.Duration
	paid      map[string]string // buyer → order ID
	dups      int

	requests, replayed, retries, soldOut, errs, abandoned, done, paidN atomic.Int64
	staleSeen                                                          atomic.Bool
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// RunLoad runs a flash sale against cfg.Targets and reports it.
func RunLoad(ctx context.Context, cfg LoadConfig) (Report, error) {
	if len(cfg.Targets) == 0 {
		return Report{}, errors.New("loadgen: no target")
	}
	if cfg.SKU == "" {
		cfg.SKU = "phone"
	}
	if cfg.Buyers <= 0 {
		cfg.Buyers = 2000
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 64
	}
	switch { // zero means the default, negative none
	case cfg.LostReply == 0:
		cfg.LostReply = 0.2
	case cfg.LostReply < 0:
		cfg.LostReply = 0
	}
	switch {
	case cfg.Abandon == 0:
		cfg.Abandon = 0.02
	case cfg.Abandon < 0:
		cfg.Abandon = 0
	}
	if cfg.Hold <= 0 {
		cfg.Hold = time.Second
	}
	if cfg.Settle <= 0 {
		cfg.Settle = 10 * time.Second
	}
	tr := &http.Transport{MaxIdleConnsPerHost: cfg.Concurrency, MaxConnsPerHost: cfg.Concurrency * 2}
	defer tr.CloseIdleConnections()
	lr := &loadRun{cfg: cfg, client: &http.Client{Transport: tr, Timeout: 10 * time.Second},
		runID: randomHex(4), paid: map[string]string{}}

	start := time.Now()
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				lr.buyer(ctx, i)
				lr.done.Add(1)
			}
		}()
	}
	var admin sync.WaitGroup
	stopProgress := make(chan struct{})
	var progress sync.WaitGroup
	if cfg.Progress != nil {
		// A terminal gets a bar redrawn in place; a file or a pipe gets
		// plain lines, fewer of them, with no carriage returns in the log.
		live := isTerminal(cfg.Progress)
		every := time.Second
		if live {
			every = 200 * time.Millisecond
		}
		progress.Add(1)
		go func() {
			defer progress.Done()
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-stopProgress:
					fmt.Fprint(cfg.Progress, lr.progressLine(start, live))
					if live {
						fmt.Fprintln(cfg.Progress)
					}
					return
				case <-t.C:
					fmt.Fprint(cfg.Progress, lr.progressLine(start, live))
				}
			}
		}()
	}
feed:
	for i := range cfg.Buyers {
		if i == cfg.Buyers/3 && cfg.Restock > 0 {
			admin.Add(1)
			go func() { defer admin.Done(); lr.adminRace(ctx) }()
		}
		select {
		case jobs <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	admin.Wait()
	elapsed := time.Since(start)
	close(stopProgress)
	progress.Wait()

	// Abandoned reservations come back through the expiry job.
	var snap Snapshot
	deadline := time.Now().Add(cfg.Settle)
	for {
		var err error
		snap, err = lr.snapshot(ctx)
		if err != nil {
			return Report{}, err
		}
		p := productOf(snap, cfg.SKU)
		if p.Reserved == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	p := productOf(snap, cfg.SKU)
	lr.mu.Lock()
	lat := slices.Clone(lr.latencies)
	paidOrders, dups := len(lr.paid), lr.dups
	lr.mu.Unlock()
	slices.Sort(lat)
	r := Report{
		Replicas: len(cfg.Targets), Buyers: cfg.Buyers, Supplied: p.Supplied, Sold: p.Confirmed, Left: p.Available,
		Reserved: p.Reserved, PaidOrders: paidOrders, Balanced: p.Balanced,
		Duplicates: dups + snap.Audit.DuplicateCharges,
		Requests:   lr.requests.Load(), Replayed: lr.replayed.Load(), Retries: lr.retries.Load(),
		SoldOut: lr.soldOut.Load(), Errors: lr.errs.Load(), Abandoned: lr.abandoned.Load(),
		ExpiredUnits: snap.ExpiredUnits, CronRuns: snap.CronRuns, DupCronRuns: snap.DuplicateCronRuns,
		StaleRejected: snap.StaleRejected, Restocks: snap.Restocks, StaleAdminSeen: lr.staleSeen.Load(),
		Elapsed: elapsed, OrdersPerSec: float64(paidOrders) / elapsed.Seconds(),
	}
	r.Oversold = max(0, max(r.Sold, int64(paidOrders), snap.Audit.Units)-r.Supplied)
	if len(lat) > 0 {
		r.P50, r.P99 = lat[len(lat)*50/100], lat[min(len(lat)-1, len(lat)*99/100)]
	}
	if cfg.Progress != nil {
		r.Print(cfg.Progress)
	}
	return r, ctx.Err()
}

func productOf(s Snapshot, sku string) ProductState {
	for _, p := range s.Products {
		if p.SKU == sku {
			return p
		}
	}
	return ProductState{}
}

// progressLine is the progress so far: a bar that overwrites itself
// (live, for a terminal) or a line of its own.
func (lr *loadRun) progressLine(start time.Time, live bool) string {
	done := int(lr.done.Load())
	el := time.Since(start)
	counts := fmt.Sprintf("%d/%d buyers  paid %d  sold-out answers %d  %.0f orders/s  %v",
		done, lr.cfg.Buyers, lr.paidN.Load(), lr.soldOut.Load(), float64(lr.paidN.Load())/el.Seconds(), el.Round(100*time.Millisecond))
	if !live {
		return "loadgen: " + counts + "\n"
	}
	const width = 30
	n := width * done / lr.cfg.Buyers
	return "\r[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "] " + counts + " "
}

// isTerminal reports whether w is a terminal (a character device), the
// only place where a bar redrawn with carriage returns reads well.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func (lr *loadRun) snapshot(ctx context.Context) (Snapshot, error) {
	var snap Snapshot
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, lr.cfg.Targets[0]+"/api/stats", nil)
	resp, err := lr.client.Do(req)
	if err != nil {
		return snap, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return snap, fmt.Errorf("loadgen: stats: %s: %s", resp.Status, b)
	}
	return snap, json.NewDecoder(resp.Body).Decode(&snap)
}

// post sends one request and records its latency.
func (lr *loadRun) post(ctx context.Context, url string, hdr map[string]string, body []byte) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	t0 := time.Now()
	resp, err := lr.client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	lr.requests.Add(1)
	lat := time.Since(t0)
	lr.mu.Lock()
	lr.latencies = append(lr.latencies, lat)
	lr.mu.Unlock()
	return resp.StatusCode, resp.Header, b, err
}

// buyer i buys one unit with one Idempotency-Key, resending it — to
// another replica — after an in-progress, busy or network failure, and
// (LostReply) after a success whose reply it pretends to have lost.
func (lr *loadRun) buyer(ctx context.Context, i int) {
	user := fmt.Sprintf("buyer-%s-%d", lr.runID, i)
	abandon := mrand.Float64() < lr.cfg.Abandon
	req := OrderRequest{SKU: lr.cfg.SKU, User: user, Qty: 1}
	if abandon {
		req.HoldMS = lr.cfg.Hold.Milliseconds()
	}
	body, _ := json.Marshal(req)
	hdr := map[string]string{"Idempotency-Key": randomHex(16)}
	resent := false
	var first string
	for attempt := 0; ; attempt++ {
		if ctx.Err() != nil || attempt == 20 {
			lr.errs.Add(1)
			return
		}
		target := lr.cfg.Targets[(i+attempt)%len(lr.cfg.Targets)]
		code, h, b, err := lr.post(ctx, target+"/orders", hdr, body)
		if h.Get("Idempotent-Replayed") == "true" {
			lr.replayed.Add(1)
		}
		switch {
		case err == nil && code == http.StatusCreated:
			var o Order
			if json.Unmarshal(b, &o) != nil {
				lr.errs.Add(1)
				return
			}
			if first != "" && o.ID != first {
				lr.mu.Lock()
				lr.dups++ // a resent key charged again
				lr.mu.Unlock()
			}
			if first == "" {
				first = o.ID
				if o.Status == "paid" {
					lr.mu.Lock()
					if _, dup := lr.paid[user]; dup {
						lr.dups++
					}
					lr.paid[user] = o.ID
					lr.mu.Unlock()
					lr.paidN.Add(1)
				} else {
					lr.abandoned.Add(1)
				}
			}
			if !resent && mrand.Float64() < lr.cfg.LostReply {
				resent = true
				continue
			}
			return
		case err == nil && code == http.StatusGone:
			if !resent {
				lr.soldOut.Add(1)
			}
			if !resent && mrand.Float64() < lr.cfg.LostReply {
				resent = true
				continue
			}
			return
		case err == nil && code < 500 && code != http.StatusConflict && code != http.StatusTooManyRequests:
			lr.errs.Add(1) // 400, 403, 422: a bug in the buyer or the service
			return
		}
		// 409 in progress, 429, 5xx, network error: retry the same key.
		lr.retries.Add(1)
		backoff := time.Duration(10<<min(attempt, 5)) * time.Millisecond
		if ra, _ := strconv.Atoi(h.Get("Retry-After")); ra > 0 {
			backoff = min(backoff, time.Duration(ra)*time.Second)
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff + time.Duration(mrand.Int64N(int64(10*time.Millisecond)))):
		}
	}
}

// adminRace is Kleppmann's scenario: admin A takes the restock lock and
// pauses past its lease; admin B takes the lock and restocks; A wakes and
// writes with its old token, which the fencing middleware refuses (409).
func (lr *loadRun) adminRace(ctx context.Context) {
	lease := func(target string) (Lease, error) {
		var l Lease
		code, _, b, err := lr.post(ctx, target+"/admin/lease?sku="+lr.cfg.SKU, nil, nil)
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("lease: %d %s", code, b)
		}
		if err == nil {
			err = json.Unmarshal(b, &l)
		}
		return l, err
	}
	restock := func(target string, l Lease) (int, error) {
		code, _, _, err := lr.post(ctx, fmt.Sprintf("%s/admin/products/%s/restock?n=%d", target, lr.cfg.SKU, lr.cfg.Restock),
			map[string]string{"Lock-Key": l.Key, "Fencing-Token": strconv.FormatUint(uint64(l.Token), 10)}, nil)
		return code, err
	}
	a, err := lease(lr.cfg.Targets[0])
	if err != nil {
		return
	}
	b, err := lease(lr.cfg.Targets[len(lr.cfg.Targets)-1]) // waits for A's lease to lapse
	if err != nil {
		return
	}
	if code, err := restock(lr.cfg.Targets[len(lr.cfg.Targets)-1], b); err != nil || code != http.StatusOK {
		return
	}
	if code, err := restock(lr.cfg.Targets[0], a); err == nil && code == http.StatusConflict {
		lr.staleSeen.Store(true)
	}
}
