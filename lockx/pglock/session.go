package pglock

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A session is one pinned pool connection that holds advisory locks for
// many keys. It never goes back to the pool while it lives: when it dies or
// the Backend closes, its connection is closed first, which ends every lock
// on it on the server.
//
// One goroutine owns the connection. Callers queue statements; the goroutine
// sends everything queued as one pipeline (each statement followed by its own
// Sync, so each is its own implicit transaction) and hands out the results.
// Concurrent lock operations thus share round trips, and a few sessions carry
// the load of many goroutines.
//
// Statements never run under a caller's context: pgx closes a connection
// whose context ends mid-statement, which would free every lock on it. They
// run under the statement timeout instead, and a caller that stops waiting
// leaves the statement to finish (see Backend.acquire).
type session struct {
	b    *Backend
	idx  int
	conn *pgxpool.Conn
	pg   *pgconn.PgConn
	pid  uint32
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
	errClosed      = errors.New("pglock: backend closed")
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

func (s *session) isKilled() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.killed
}

func (s *session) take() []*op {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := min(len(s.queue), maxBatch)
	// A blocking acquisition travels alone: the results of a batch are
	// handed out together, and nothing should wait for its lock.
	for i, o := range s.queue[:n] {
		if o.stmt == stAcquireWait {
			n = max(i, 1)
			break
		}
	}
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

// run is the session's goroutine. It ends when the session dies or the
// Backend closes.
func (s *session) run() {
	defer s.b.wg.Done()
	health := time.NewTimer(s.b.cfg.health)
	defer health.Stop()
	sweepEvery := time.Minute
	lastSweep := time.Now()
	for {
		timeout := s.b.cfg.stmtTimeout
		select {
		case <-s.b.closing:
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
		for {
			if s.isKilled() {
				s.die(errKilled, nil)
				return
			}
			batch := s.take()
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
		}
		health.Reset(s.b.cfg.health)
	}
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
	var hashes, keys, owners, leases arrayText
	for _, i := range idx {
		g := batch[i].group
		hashes.int(g.hash)
		keys.bytea(g.key)
		owners.bytea(g.owner)
		leases.int(g.leaseMS)
	}
	return wire{stmt: stAcquireMany, args: [][]byte{hashes.done(), keys.done(), owners.done(), leases.done()},
		formats: []int16{0, 0, 0, 0}, ops: idx}
}

func (s *session) releaseMany(batch []*op, idx []int) wire {
	var hashes, owners, w1s, w2s arrayText
	for _, i := range idx {
		g := batch[i].group
		w1, w2 := waitFlag(g.hash)
		hashes.int(g.hash)
		owners.bytea(g.owner)
		w1s.int(int64(w1))
		w2s.int(int64(w2))
	}
	return wire{stmt: stReleaseMany, args: [][]byte{hashes.done(), owners.done(), w1s.done(), w2s.done(), []byte(s.b.names.channel)},
		formats: []int16{0, 0, 0, 0, 1}, ops: idx}
}

// arrayText builds a PostgreSQL array literal (text format).
type arrayText struct{ b []byte }

func (a *arrayText) sep() {
	if len(a.b) == 0 {
		a.b = append(a.b, '{')
	} else {
		a.b = append(a.b, ',')
	}
}

func (a *arrayText) int(v int64) {
	a.sep()
	a.b = strconv.AppendInt(a.b, v, 10)
}

func (a *arrayText) bytea(v []byte) {
	a.sep()
	a.b = append(a.b, `"\\x`...)
	a.b = hex.AppendEncode(a.b, v)
	a.b = append(a.b, '"')
}

func (a *arrayText) done() []byte {
	if len(a.b) == 0 {
		return []byte("{}")
	}
	return append(a.b, '}')
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
		vals := rr.Values()
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
		rs.all = append(rs.all, r)
	}
	tag, err := rr.Close()
	rs.rows = tag.RowsAffected()
	rs.err = err
	return rs
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
	s.conn.Release() // the pool destroys a closed connection
}
