package pglock

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lockx-go/lockx/internal/testenv"
)

// TestArrayBin sends arrays built by arrayBin to the server in the binary
// format, as the grouped grant and release statements do, and checks that
// array_recv reads back exactly the elements sent: int8 (negative and
// extreme values), int4, bytea (empty, binary, long) and the empty array.
func TestArrayBin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())

	// roundTrip returns the server's text rendering of the array sent.
	roundTrip := func(t *testing.T, typ string, a *arrayBin) string {
		t.Helper()
		res := conn.ExecParams(ctx, "SELECT $1::"+typ+"::text", [][]byte{a.done()}, nil, []int16{1}, []int16{0}).Read()
		if res.Err != nil {
			t.Fatalf("%s: %v", typ, res.Err)
		}
		return string(res.Rows[0][0])
	}

	t.Run("int8", func(t *testing.T) {
		a := newArray(oidInt8, 4)
		for _, v := range []int64{1, -1, 1<<63 - 1, -1 << 63} {
			a.int8(v)
		}
		if got, want := roundTrip(t, "int8[]", a), "{1,-1,9223372036854775807,-9223372036854775808}"; got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	})
	t.Run("int4", func(t *testing.T) {
		a := newArray(oidInt4, 3)
		for _, v := range []int32{0, -7, 1<<31 - 1} {
			a.int4(v)
		}
		if got, want := roundTrip(t, "int4[]", a), "{0,-7,2147483647}"; got != want {
			t.Fatalf("got %s, want %s", got, want)
		}
	})
	t.Run("bytea", func(t *testing.T) {
		long := bytes.Repeat([]byte{0xab}, 300)
		elems := [][]byte{{}, {0, '"', '\\', ',', '}', 0xff}, long}
		a := newArray(oidBytea, len(elems))
		for _, e := range elems {
			a.elem(e)
		}
		res := conn.ExecParams(ctx, "SELECT e FROM unnest($1::bytea[]) WITH ORDINALITY AS u(e, i) ORDER BY i",
			[][]byte{a.done()}, nil, []int16{1}, []int16{1}).Read()
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		if len(res.Rows) != len(elems) {
			t.Fatalf("got %d elements, want %d", len(res.Rows), len(elems))
		}
		for i, r := range res.Rows {
			if r[0] == nil || !bytes.Equal(r[0], elems[i]) {
				t.Errorf("element %d: got %x, want %x", i, r[0], elems[i])
			}
		}
	})
	t.Run("empty", func(t *testing.T) {
		if got := roundTrip(t, "bytea[]", newArray(oidBytea, 0)); got != "{}" {
			t.Fatalf("got %s, want {}", got)
		}
	})
}
