package leadertest

import "testing"

// TestCheckHistory: the model check accepts terms that follow each other
// and rejects two leaders at once and a term that does not rise.
func TestCheckHistory(t *testing.T) {
	ok := []span{
		{id: 0, term: 1, call: 0, ret: 10, rcall: 20, end: 25},
		{id: 1, term: 2, call: 5, ret: 26, rcall: 40, end: 45},
	}
	if err := checkHistory(ok); err != nil {
		t.Errorf("a valid history rejected: %v", err)
	}
	overlap := []span{
		{id: 0, term: 1, call: 0, ret: 10, rcall: 30, end: 35},
		{id: 1, term: 2, call: 5, ret: 20, rcall: 40, end: 45}, // led from 20, while 0 led until 30
	}
	if checkHistory(overlap) == nil {
		t.Error("two leaders at once accepted")
	}
	falling := []span{
		{id: 0, term: 2, call: 0, ret: 10, rcall: 20, end: 25},
		{id: 1, term: 1, call: 5, ret: 26, rcall: 40, end: 45},
	}
	if checkHistory(falling) == nil {
		t.Error("a falling term accepted")
	}
}
