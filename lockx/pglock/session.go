package pglock

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/lockx-go/lockx/lockx/driver"
)

// A session is one pinned pool connection that holds advisory locks for
// many keys. It never goes back to the pool while it lives: when it dies or
// the Backend closes, its connection is closed first, which ends every lock
// on it on the server.
//
// One goroutine owns the connection, but for a caller that has claimed an
// idle wait session to run its own statement (claim). Callers queue
// statements; the goroutine sends everything queued as one pipeline (each
// statement followed by its own Sync, so each is its own implicit
// transaction) and hands out the results. Concurrent lock operations thus
// share round trips, and a few sessions carry the load of many goroutines.
//
// Statements never run under a caller's context: pgx closes a connection
// whose context ends mid-statement, which would free every lock on it. They
// run under the statement timeout instead, and a caller that stops waiting
// leaves the statement to finish (see Backend.acquire; a caller reading its
// own blocking acquisition hands the rest of the read over, driveWait).
type session struct {
	b   *Backend
	idx int
	// release gives a pool connection back after closeConn closed it.
	release func()
	pg      *pgconn.PgConn
	pid     uint32
	// waiting marks a wait session: it takes only blocking acquisitions
	// (acquireWait), one at a time, and then carries their holds.
	waiting bool
	// busy (a blocking acquisition is in flight) and lent (the hold it
	// granted) are guarded by b.mu. A wait session is free for the next
	// waiter when neither is current: it then holds no advisory lock, or
	// its last one is being released by an op queued ahead.
	busy bool
	lent *hold

	mu     sync.Mutex
	queue  []*op
	dead   bool
	killed bool
	// executing: the session's goroutine is running a batch; driven: a
	// caller is running one itself (claim).
	executing bool
	driven    bool
	resume    *waitRead  // a blocking acquisition's read, cut by its caller (driveWait)
	undriven  *sync.Cond // on mu: signalled when driven ends

	wake chan struct{}
}

// op is one statement with its binary parameters. fin runs on the session's
// goroutine once the result (or the session's death) is known.
type op struct {
	stmt string
	args [][]byte
	fin  func(r result)
	// group, if set, lets exec merge this op with others of its kind in
	// the same batch into one multi-row statement (stAcquireMany,
	// stReleaseMany). Reordering ops within a session is safe: advisory
	// locks are reentrant per session and row updates are owner-checked.
	group *groupArgs
}

type groupKind uint8

const (
	groupAcquire groupKind = iota + 1
	groupRelease
)

type groupArgs struct {
	kind    groupKind
	hash    int64
	key     []byte
	owner   []byte
	leaseMS int64
}

// result is the outcome of one op: the first row's int8 columns (null where
// SQL NULL), the rows affected, or an error.
type result struct {
	vals []int64
	null []bool
	rows int64
	err  error
}

func (r result) isNull(i int) bool { return i >= len(r.null) || r.null[i] }

func (r result) val(i int) int64 {
	if r.isNull(i) {
		return 0
	}
	return r.vals[i]
}

var (
	errSessionLost = errors.New("pglock: holder session lost")
	errClosed      = fmt.Errorf("pglock: backend closed: %w", driver.ErrClosed)
	errKilled      = errors.New("pglock: session closed after a failed release")
)

const maxBatch = 256

var (
	binaryFormats = []int16{1, 1, 1, 1, 1, 1, 1, 1}
	binaryResults = []int16{1}
)

func i8(v int64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, uint64(v))
	return b
}

func i4(v int32) []byte {
	b := make([]byte, 4)
	binary.BigEndian.PutUint32(b, uint32(v))
	return b
}

func boolean(v bool) []byte {
	if v {
		return []byte{1}
	}
	return []byte{0}
}

func ms(d time.Duration) int64 { return max(d.Milliseconds(), 1) }

// enqueue adds o to the session's queue; false if the session is dead.
func (s *session) enqueue(ops ...*op) bool {
	s.mu.Lock()
	if s.dead {
		s.mu.Unlock()
		return false
	}
	s.queue = append(s.queue, ops...)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return true
}

func (s *session) isDead() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dead
}

func (s *session) isDriven() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.driven
}

func (s *session) isKilled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.killed
}

func (s *session) take() []*op {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.driven {
		return nil // the caller wakes the session when it is done
	}
	n := min(len(s.queue), maxBatch)
	// A blocking acquisition travels alone: the results of a batch are
	// handed out together, and nothing should wait for its lock.
	for i, o := range s.queue[:n] {
		if o.stmt == stAcquireWait {
			n = max(i, 1)
			break
		}
	}
	s.executing = n > 0
	batch := make([]*op, n)
	copy(batch, s.queue)
	s.queue = s.queue[n:]
	if len(s.queue) == 0 {
		s.queue = nil
	} else {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	return batch
}

// settle lets the callers of the last batch come back before the next batch
// is taken. Its results woke them, and most queue their next statement at
// once (a release after a grant); taken at once, the queue would hold the
// first of them only, and one round trip would carry one statement while
// the rest queue behind it. So while fewer ops are queued than the last
// batch carried, the session goroutine yields to runnable goroutines — at
// most twice, and never waits: callers that do not come back cost it two
// yields, not a delay. Batches fill, and the server spends less per lock
// (32 goroutines on distinct keys, 2 sessions: 7–8 → 12 ops per round
// trip, 28 → 21 µs of server CPU per acquire + release). After a batch of
// one op nothing is to be gained: a lone caller's next op wakes the session
// as before, and so does every handoff of a hot key.
func (s *session) settle(last int) {
	if last < 2 {
		return
	}
	for range 2 {
		s.mu.Lock()
		n := len(s.queue)
		s.mu.Unlock()
		if n >= last {
			return
		}
		runtime.Gosched()
	}
}

// run is the session's goroutine. It ends when the session dies or the
// Backend closes.
func (s *session) run() {
	health := time.NewTimer(s.b.cfg.health)
	defer health.Stop()
	sweepEvery := time.Minute
	lastSweep := time.Now()
	for {
		timeout := s.b.cfg.stmtTimeout
		select {
		case <-s.b.g.Done():
			s.shutdown()
			return
		case <-s.wake:
		case <-health.C:
			// Idle: ping, bounded by the health interval, so a dead session
			// is noticed within about one interval.
			s.enqueue(&op{stmt: stPing, fin: func(result) {}})
			timeout = s.b.cfg.health
			if s.idx == 0 && time.Since(lastSweep) > sweepEvery {
				lastSweep = time.Now()
				s.enqueue(&op{stmt: stSweep, fin: func(result) {}})
			}
		}
		last := 0
		for {
			if s.isDead() {
				return // ended by a caller driving it
			}
			if s.isKilled() && !s.isDriven() {
				s.die(errKilled, nil)
				return
			}
			if !s.resumeRead() {
				return
			}
			s.settle(last)
			batch := s.take()
			last = len(batch)
			if len(batch) == 0 {
				break
			}
			results, fatal := s.exec(batch, timeout)
			if fatal != nil {
				s.die(fatal, batch)
				return
			}
			for i, o := range batch {
				o.fin(results[i])
			}
			s.mu.Lock()
			s.executing = false
			s.mu.Unlock()
		}
		health.Reset(s.b.cfg.health)
	}
}

// A caller may run its statements on a wait session itself (claim, drive,
// driveWait) rather than hand them to the session's goroutine: a hot key's
// handoff then wakes the waiter's goroutine alone, as a bare blocking
// pg_advisory_lock would, where a goroutine of the session's would read the
// grant and wake the caller, and the release would wake it and be woken
// back: four goroutine hand-overs per handoff, for each of which the Go
// scheduler may wake a second thread. On the 2-core bench machine that was
// about a context switch and a tenth of the client CPU per handoff
// (docs/backends.md, "The waiter reads its own grant").

// claim lets the caller run statements on s itself: true if s is alive,
// nothing is queued and its goroutine runs no batch. The caller then owns
// the connection until drive or driveWait returns.
func (s *session) claim() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead || s.killed || s.driven || s.executing || s.resume != nil || len(s.queue) > 0 {
		return false
	}
	s.driven = true
	return true
}

// unclaim gives the connection back to the session's goroutine, with r (if
// not nil) for it to finish reading, and wakes it if it has work.
func (s *session) unclaim(r *waitRead) {
	s.mu.Lock()
	s.driven = false
	s.resume = r
	work := r != nil || len(s.queue) > 0 || s.killed
	s.undriven.Broadcast()
	s.mu.Unlock()
	if work {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// drive runs o on the caller's goroutine as the session's goroutine would
// (see claim). Like every statement of a session it runs under the
// statement timeout, not the caller's context.
func (s *session) drive(o *op) {
	batch := []*op{o}
	results, fatal := s.exec(batch, s.b.cfg.stmtTimeout)
	if fatal != nil {
		s.die(fatal, batch)
		s.unclaim(nil)
		return
	}
	o.fin(results[0])
	s.unclaim(nil)
}

// driveWait runs the blocking acquisition o on the caller's goroutine (see
// claim). A caller whose context ends must return at once, while the
// statement goes on in the server until its wait slice ends: the read is
// cut by a deadline on the connection, which pgconn survives (a timeout
// leaves the connection open and a half-read message where it was), and
// the session's goroutine reads the rest and runs o.fin, which gives back a
// grant nobody waits for. Cutting the read, unlike a cancel request, cannot
// hit a later statement.
func (s *session) driveWait(ctx context.Context, o *op) {
	conn := s.pg.Conn()
	// The statement timeout bounds the write and the read, as it bounds a
	// batch of the session's goroutine; the caller's context cuts the read.
	_ = conn.SetDeadline(time.Now().Add(s.b.cfg.stmtTimeout))
	fe := s.pg.Frontend()
	fe.SendBind(&pgproto3.Bind{PreparedStatement: o.stmt, ParameterFormatCodes: binaryFormats[:len(o.args)],
		Parameters: o.args, ResultFormatCodes: binaryResults})
	fe.SendExecute(&pgproto3.Execute{})
	fe.SendSync(&pgproto3.Sync{})
	r := &waitRead{o: o}
	if err := fe.Flush(); err != nil {
		s.die(err, []*op{o})
		s.unclaim(nil)
		return
	}
	cut := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = conn.SetReadDeadline(time.Now())
		close(cut)
	})
	err := r.read(s.pg)
	if !stop() {
		<-cut // the deadline is set: a later one must not be overwritten by it
	}
	switch {
	case err == nil:
		_ = conn.SetDeadline(time.Time{})
		o.fin(r.res)
		s.unclaim(nil)
	case pgconn.Timeout(err) && ctx.Err() != nil:
		// Cut: the session's goroutine reads on (session.run).
		s.unclaim(r)
	default:
		s.die(err, []*op{o})
		s.unclaim(nil)
	}
}

// waitRead is the reading of one blocking acquisition's result, which may
// be cut (driveWait) and taken up again.
type waitRead struct {
	o   *op
	res result
	row bool
}

// read reads up to the statement's ReadyForQuery. On an error (a timeout,
// when the read was cut) it may be called again and goes on where it was.
func (r *waitRead) read(pg *pgconn.PgConn) error {
	for {
		msg, err := pg.ReceiveMessage(context.Background())
		if err != nil {
			return err
		}
		switch m := msg.(type) {
		case *pgproto3.DataRow:
			if !r.row {
				r.row = true
				w := parseRow(m.Values)
				r.res.vals, r.res.null = w.vals, w.null
			}
		case *pgproto3.CommandComplete:
			r.res.rows = pgconn.NewCommandTag(string(m.CommandTag)).RowsAffected()
		case *pgproto3.ErrorResponse:
			r.res.err = pgconn.ErrorResponseToPgError(m)
		case *pgproto3.ReadyForQuery:
			return nil
		}
	}
}

// resumeRead finishes, on the session's goroutine, a read its caller cut
// (driveWait); false if the session died.
func (s *session) resumeRead() bool {
	s.mu.Lock()
	r := s.resume
	s.resume = nil
	s.executing = r != nil // no caller may claim s meanwhile
	s.mu.Unlock()
	if r == nil {
		return true
	}
	conn := s.pg.Conn()
	_ = conn.SetDeadline(time.Now().Add(s.b.cfg.stmtTimeout))
	if err := r.read(s.pg); err != nil {
		s.die(err, []*op{r.o})
		return false
	}
	_ = conn.SetDeadline(time.Time{})
	r.o.fin(r.res)
	s.mu.Lock()
	s.executing = false
	s.mu.Unlock()
	return true
}

// wire is one statement sent for one or more ops.
type wire struct {
	stmt    string
	args    [][]byte
	formats []int16
	ops     []int // indexes into the batch
}

// plan turns a batch into the statements to send: ops of one group kind
// become a single multi-row statement when there are several of them.
func (s *session) plan(batch []*op) []wire {
	var acq, rel []int
	for i, o := range batch {
		if o.group == nil {
			continue
		}
		switch o.group.kind {
		case groupAcquire:
			acq = append(acq, i)
		case groupRelease:
			rel = append(rel, i)
		}
	}
	ws := make([]wire, 0, len(batch))
	grouped := make([]bool, len(batch))
	if len(rel) > 1 {
		ws = append(ws, s.releaseMany(batch, rel))
		for _, i := range rel {
			grouped[i] = true
		}
	}
	if len(acq) > 1 {
		ws = append(ws, acquireMany(batch, acq))
		for _, i := range acq {
			grouped[i] = true
		}
	}
	for i, o := range batch {
		if !grouped[i] {
			ws = append(ws, wire{stmt: o.stmt, args: o.args, formats: binaryFormats[:len(o.args)], ops: []int{i}})
		}
	}
	return ws
}

func acquireMany(batch []*op, idx []int) wire {
	hashes, keys, owners, leases := newArray(oidInt8, len(idx)), newArray(oidBytea, len(idx)), newArray(oidBytea, len(idx)), newArray(oidInt8, len(idx))
	for _, i := range idx {
		g := batch[i].group
		hashes.int8(g.hash)
		keys.elem(g.key)
		owners.elem(g.owner)
		leases.int8(g.leaseMS)
	}
	return wire{stmt: stAcquireMany, args: [][]byte{hashes.done(), keys.done(), owners.done(), leases.done()},
		formats: binaryFormats[:4], ops: idx}
}

func (s *session) releaseMany(batch []*op, idx []int) wire {
	hashes, owners, w1s, w2s := newArray(oidInt8, len(idx)), newArray(oidBytea, len(idx)), newArray(oidInt4, len(idx)), newArray(oidInt4, len(idx))
	for _, i := range idx {
		g := batch[i].group
		w1, w2 := waitFlag(g.hash)
		hashes.int8(g.hash)
		owners.elem(g.owner)
		w1s.int4(w1)
		w2s.int4(w2)
	}
	return wire{stmt: stReleaseMany, args: [][]byte{hashes.done(), owners.done(), w1s.done(), w2s.done(), []byte(s.b.names.channel)},
		formats: binaryFormats[:5], ops: idx}
}

// Element type OIDs of the arrays sent in binary format.
const (
	oidBytea uint32 = 17
	oidInt8  uint32 = 20
	oidInt4  uint32 = 23
)

// arrayBin builds a one-dimensional PostgreSQL array in the binary format
// (what array_recv reads): the server decodes it at a fraction of the cost
// of parsing a text literal, most of all for bytea elements.
type arrayBin struct {
	oid uint32
	n   uint32
	b   []byte
}

// arrayHeader is the size of a one-dimensional array's header: dimensions,
// null flag, element type, length and lower bound, four bytes each.
const arrayHeader = 20

func newArray(oid uint32, n int) *arrayBin {
	return &arrayBin{oid: oid, b: make([]byte, arrayHeader, arrayHeader+n*16)}
}

func (a *arrayBin) elem(v []byte) {
	a.n++
	a.b = binary.BigEndian.AppendUint32(a.b, uint32(len(v)))
	a.b = append(a.b, v...)
}

func (a *arrayBin) int8(v int64) {
	a.n++
	a.b = binary.BigEndian.AppendUint32(a.b, 8)
	a.b = binary.BigEndian.AppendUint64(a.b, uint64(v))
}

func (a *arrayBin) int4(v int32) {
	a.n++
	a.b = binary.BigEndian.AppendUint32(a.b, 4)
	a.b = binary.BigEndian.AppendUint32(a.b, uint32(v))
}

// done fills in the header. An empty array has no dimensions.
func (a *arrayBin) done() []byte {
	if a.n == 0 {
		b := make([]byte, 12)
		binary.BigEndian.PutUint32(b[8:], a.oid)
		return b
	}
	binary.BigEndian.PutUint32(a.b[0:], 1) // dimensions
	binary.BigEndian.PutUint32(a.b[4:], 0) // no nulls
	binary.BigEndian.PutUint32(a.b[8:], a.oid)
	binary.BigEndian.PutUint32(a.b[12:], a.n)
	binary.BigEndian.PutUint32(a.b[16:], 1) // lower bound
	return a.b
}

// exec sends batch as one pipeline and reads every result. fatal is set when
// the connection broke; results then holds what was read before (the zero
// result for ops whose statement was not read).
func (s *session) exec(batch []*op, timeout time.Duration) (results []result, fatal error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	results = make([]result, len(batch))
	ws := s.plan(batch)
	p := s.pg.StartPipeline(ctx)
	for _, w := range ws {
		p.SendQueryPrepared(w.stmt, w.args, w.formats, binaryResults)
		p.SendPipelineSync()
	}
	if err := p.Flush(); err != nil {
		_ = p.Close()
		return nil, err
	}
	for _, w := range ws {
		rows := readResult(p)
		for j, i := range w.ops {
			r := result{rows: rows.rows, err: rows.err}
			if j < len(rows.all) {
				r.vals, r.null = rows.all[j].vals, rows.all[j].null
			} else if rows.err == nil && len(w.ops) > 1 {
				r.err = errors.New("pglock: missing result row")
			}
			results[i] = r
		}
		if err := readSync(p); err != nil || s.pg.IsClosed() {
			_ = p.Close()
			if err == nil {
				err = rows.err
			}
			if err == nil {
				err = errors.New("connection closed")
			}
			return nil, err
		}
	}
	if err := p.Close(); err != nil && s.pg.IsClosed() {
		return nil, err
	}
	return results, nil
}

// rowSet is a statement's result: every row's int8 columns.
type rowSet struct {
	all  []row
	rows int64
	err  error
}

type row struct {
	vals []int64
	null []bool
}

func readResult(p *pgconn.Pipeline) rowSet {
	res, err := p.GetResults()
	if err != nil {
		return rowSet{err: err}
	}
	rr, ok := res.(*pgconn.ResultReader)
	if !ok {
		return rowSet{err: fmt.Errorf("pglock: unexpected pipeline result %T", res)}
	}
	var rs rowSet
	for rr.NextRow() {
		rs.all = append(rs.all, parseRow(rr.Values()))
	}
	tag, err := rr.Close()
	rs.rows = tag.RowsAffected()
	rs.err = err
	return rs
}

// parseRow reads a row's columns, sent in binary: int8 and int4 as numbers,
// SQL NULL (and any other column) as null.
func parseRow(vals [][]byte) row {
	r := row{vals: make([]int64, len(vals)), null: make([]bool, len(vals))}
	for j, v := range vals {
		switch len(v) {
		case 8:
			r.vals[j] = int64(binary.BigEndian.Uint64(v))
		case 4:
			r.vals[j] = int64(int32(binary.BigEndian.Uint32(v)))
		default:
			r.null[j] = v == nil
		}
	}
	return r
}

// readSync consumes the Sync that follows every statement. An error reported
// in its place (the statement's own, already seen) is skipped.
func readSync(p *pgconn.Pipeline) error {
	for range 3 {
		res, err := p.GetResults()
		var pgErr *pgconn.PgError
		switch {
		case errors.As(err, &pgErr):
			continue
		case err != nil:
			return err
		}
		if _, ok := res.(*pgconn.PipelineSync); ok {
			return nil
		}
	}
	return errors.New("pglock: pipeline out of step")
}

// die ends a session whose connection broke: every lock on it is gone on the
// server, so the Backend reports them lost before failing the queued ops.
func (s *session) die(cause error, batch []*op) {
	s.mu.Lock()
	if s.dead {
		// Ended already (by a caller driving it, or its goroutine).
		s.mu.Unlock()
		err := fmt.Errorf("%w: %w", errSessionLost, cause)
		for _, o := range batch {
			o.fin(result{err: err})
		}
		return
	}
	s.dead = true
	queued := s.queue
	s.queue = nil
	s.mu.Unlock()
	s.closeConn()
	s.b.sessionLost(s, cause)
	err := fmt.Errorf("%w: %w", errSessionLost, cause)
	for _, o := range batch {
		o.fin(result{err: err})
	}
	for _, o := range queued {
		o.fin(result{err: err})
	}
}

// shutdown is Close's end of a session: fail what is queued, then free every
// lock of the session (telling waiters) and remove its rows before closing
// the connection, so that the locks are free when Close returns.
func (s *session) shutdown() {
	s.mu.Lock()
	for s.driven {
		// A caller's statement, bounded by the statement timeout (a blocking
		// acquisition by its wait slice), or the caller's context.
		s.undriven.Wait()
	}
	s.mu.Unlock()
	if !s.resumeRead() {
		return // died: nothing left to free
	}
	s.mu.Lock()
	s.dead = true
	queued := s.queue
	s.queue = nil
	s.mu.Unlock()
	for _, o := range queued {
		o.fin(result{err: errClosed})
	}
	ctx, cancel := context.WithTimeout(context.Background(), min(s.b.cfg.stmtTimeout, 2*time.Second))
	defer cancel()
	if !s.pg.IsClosed() {
		n := s.b.names
		_, _ = s.pg.Exec(ctx, `WITH d AS (DELETE FROM `+n.held+` WHERE pid = pg_backend_pid() RETURNING hash)
SELECT pg_advisory_unlock_all(), (SELECT count(pg_notify(`+quoteLiteral(n.channel)+`, d.hash::text)) FROM d)`).ReadAll()
	}
	s.closeConn()
}

func (s *session) closeConn() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = s.pg.Close(ctx)
	s.release() // the pool destroys a closed connection
}
