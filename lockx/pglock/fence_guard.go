package pglock

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// fenceMargin is how far the fence sequence is moved ahead, durably, when
// its guard finds the marker gone. It must exceed the tokens a crash can
// un-issue: those drawn by grants whose commits had not reached the disk
// (or a synchronous standby) yet. A billion is 1,000 s of WAL at a million
// grants per second; the sequence's 2^53 − 1 allows eight million such
// bumps.
const fenceMargin = 1 << 30

// guardFence makes a new holder or wait session commit asynchronously
// while keeping fencing tokens monotonic across crashes.
//
// A grant draws its token with nextval, which writes WAL every 32 values
// and then makes its commit wait for the flush: with a synchronous commit
// one grant in 32 holds its lock, and stalls its session's pipeline, for a
// disk flush (measured ≈ 2.5 ms here, and far longer when the disk is
// busy). Holder sessions therefore run with synchronous_commit = off;
// nothing they write needs to survive a crash but the sequence. After a
// crash — or a failover, whose new primary may lack the last WAL — the
// sequence can restart below tokens already handed out, but the UNLOGGED
// tables are empty then, the marker row of lockx_epoch included. Every
// session, before its first grant, checks the marker: if it is missing it
// moves the sequence ahead by fenceMargin and inserts the marker in one
// transaction that commits synchronously. A session that finds the marker
// knows such a bump committed after the last crash, so every token it
// draws is above every token drawn before that crash. Sessions of a crashed
// server die with it, so no grant is made by a session that did not check.
// With the marker present the check writes nothing, so it costs no flush.
func (b *Backend) guardFence(ctx context.Context, conn *pgx.Conn) error {
	n := b.names
	_, err := conn.PgConn().Exec(ctx, `SELECT set_config('synchronous_commit', 'on', true),
	CASE WHEN EXISTS (SELECT 1 FROM `+n.epoch+`) THEN 0
		ELSE setval(`+n.fenceLit+`::regclass, nextval(`+n.fenceLit+`::regclass) + `+strconv.Itoa(fenceMargin)+`) END;
INSERT INTO `+n.epoch+` (id) SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM `+n.epoch+`) ON CONFLICT DO NOTHING`).ReadAll()
	if err != nil {
		return err
	}
	if err := conn.PgConn().Exec(ctx, sessionSettings).Close(); err != nil {
		return fmt.Errorf("pglock: %w", err)
	}
	return nil
}

// sessionSettings are applied to every holder and wait session once its
// fence guard has passed: asynchronous commit (see guardFence), and generic
// plans for the prepared statements. PostgreSQL's default plan cache
// re-plans a statement for its parameters whenever a custom plan looks
// cheaper; for the multi-row grant and release statements (stAcquireMany,
// stReleaseMany) with a few array elements it always does, so every batch
// paid the planner: 280–370 µs of server CPU per acquire + release batch of
// 2–16 keys instead of 75–135 µs with the generic plan (measured on one
// session, 2 s per size). Every statement here is a primary-key lookup or
// an advisory-lock call, so the generic plan is the right one for any
// parameter.
const sessionSettings = "SET synchronous_commit = off; SET plan_cache_mode = force_generic_plan"
