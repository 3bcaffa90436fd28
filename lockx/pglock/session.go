package pglock

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
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
				s.die(errKilled, nil, nil)
				return
			}
			batch := s.take()
			if len(batch) == 0 {
				break
			}
			results, fatal := s.exec(batch, timeout)
			if fatal != nil {
				s.die(fatal, batch, results)
				return
			}
			for i, o := range batch {
				o.fin(results[i])
			}
		}
		health.Reset(s.b.cfg.health)
	}
}

// exec sends batch as one pipeline and reads every result. fatal is set when
// the connection broke; results then holds what was read before.
func (s *session) exec(batch []*op, timeout time.Duration) (results []result, fatal error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	results = make([]result, len(batch))
	p := s.pg.StartPipeline(ctx)
	for _, o := range batch {
		p.SendQueryPrepared(o.stmt, o.args, binaryFormats[:len(o.args)], binaryResults)
		p.SendPipelineSync()
	}
	if err := p.Flush(); err != nil {
		_ = p.Close()
		return results[:0], err
	}
	for i := range batch {
		results[i] = readResult(p)
		if err := readSync(p); err != nil || s.pg.IsClosed() {
			_ = p.Close()
			if err == nil {
				err = results[i].err
			}
			if err == nil {
				err = errors.New("connection closed")
			}
			return results[:i], err
		}
	}
	if err := p.Close(); err != nil && s.pg.IsClosed() {
		return results, err
	}
	return results, nil
}

func readResult(p *pgconn.Pipeline) result {
	res, err := p.GetResults()
	if err != nil {
		return result{err: err}
	}
	rr, ok := res.(*pgconn.ResultReader)
	if !ok {
		return result{err: fmt.Errorf("pglock: unexpected pipeline result %T", res)}
	}
	var r result
	first := true
	for rr.NextRow() {
		if !first {
			continue
		}
		first = false
		vals := rr.Values()
		r.vals = make([]int64, len(vals))
		r.null = make([]bool, len(vals))
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
	}
	tag, err := rr.Close()
	r.rows = tag.RowsAffected()
	r.err = err
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
func (s *session) die(cause error, batch []*op, done []result) {
	s.mu.Lock()
	s.dead = true
	queued := s.queue
	s.queue = nil
	s.mu.Unlock()
	s.closeConn()
	s.b.sessionLost(s, cause)
	err := fmt.Errorf("%w: %w", errSessionLost, cause)
	for i, o := range batch {
		if i < len(done) && done[i].err == nil {
			o.fin(done[i]) // fins check s.isDead before trusting a grant
			continue
		}
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
