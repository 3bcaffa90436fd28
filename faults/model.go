package faults

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// RegIn is an operation on the fenced register: a read, or a write of Val
// carrying the writer's fencing token.
type RegIn struct {
	Write bool
	Val   int64
	Token uint64
}

// RegOut is its outcome: for a read the value seen; for a write whether it
// was accepted. Unknown marks an operation whose outcome was never learnt
// (an error after the request may have reached the server).
type RegOut struct {
	Val     int64
	OK      bool
	Unknown bool
}

type regState struct {
	Val    int64
	MaxTok uint64
}

// RegisterModel is the fenced register {val, maxTok}: a write is accepted
// if and only if its token is ≥ maxTok, and then sets both; a read returns
// val. A stale write that a resource accepted makes a history illegal.
var RegisterModel = (&porcupine.NondeterministicModel{
	Init: func() []any { return []any{regState{}} },
	Step: func(s, i, o any) []any {
		st, in, out := s.(regState), i.(RegIn), o.(RegOut)
		if !in.Write {
			if out.Unknown || out.Val == st.Val {
				return []any{st}
			}
			return nil
		}
		accepted := regState{Val: in.Val, MaxTok: in.Token}
		fresh := in.Token >= st.MaxTok
		switch {
		case out.Unknown && fresh:
			return []any{st, accepted}
		case out.Unknown:
			return []any{st}
		case out.OK && fresh:
			return []any{accepted}
		case out.OK:
			return nil // a stale write was accepted
		case fresh:
			return nil // a current write was refused
		default:
			return []any{st}
		}
	},
	DescribeOperation: func(i, o any) string {
		in, out := i.(RegIn), o.(RegOut)
		if !in.Write {
			return fmt.Sprintf("read() -> %d", out.Val)
		}
		return fmt.Sprintf("write(%d, tok %d) -> ok=%v unknown=%v", in.Val, in.Token, out.OK, out.Unknown)
	},
}).ToModel()

// MutexIn is a lock operation by a client: acquire or release.
type MutexIn struct {
	Release bool
	Client  int
}

// MutexOut is its outcome: whether it succeeded, the granted token, or
// Unknown.
type MutexOut struct {
	OK      bool
	Unknown bool
	Token   uint64
}

type mutexState struct {
	Holder int // -1: free
	Last   uint64
}

// MutexModel is the fenced mutex (after Jepsen's Hazelcast FencedMutex):
// an acquire is legal only while the lock is free and with a token above
// every earlier one; a release frees it if the client holds it. Under
// faults that outlast a lease this model is expected to fail — a lease
// expired and a second client got the lock — which the suite reports.
var MutexModel = (&porcupine.NondeterministicModel{
	Init: func() []any { return []any{mutexState{Holder: -1}} },
	Step: func(s, i, o any) []any {
		st, in, out := s.(mutexState), i.(MutexIn), o.(MutexOut)
		switch {
		case !in.Release && out.Unknown:
			return []any{st, mutexState{Holder: in.Client, Last: st.Last}}
		case !in.Release && !out.OK:
			return []any{st}
		case !in.Release:
			if st.Holder != -1 || out.Token <= st.Last {
				return nil
			}
			return []any{mutexState{Holder: in.Client, Last: out.Token}}
		case st.Holder == in.Client:
			return []any{mutexState{Holder: -1, Last: st.Last}}
		case out.OK:
			return nil // a release by a non-holder succeeded
		default:
			return []any{st}
		}
	},
	DescribeOperation: func(i, o any) string {
		in, out := i.(MutexIn), o.(MutexOut)
		op := "acquire"
		if in.Release {
			op = "release"
		}
		return fmt.Sprintf("c%d %s -> ok=%v tok=%d unknown=%v", in.Client, op, out.OK, out.Token, out.Unknown)
	},
}).ToModel()
