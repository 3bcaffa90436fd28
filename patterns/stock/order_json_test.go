package stock_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/lockx-go/lockx/patterns/stock"
)

// TestOrderJSON pins the JSON of an Order, which services hand to buyers
// and keep to confirm later: snake_case names, no zero deadline, and a
// round trip that loses nothing.
func TestOrderJSON(t *testing.T) {
	deadline := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		o    stock.Order
		want string
	}{
		{stock.Order{ID: "o1", SKU: "phone", User: "alice", Qty: 1, Parts: []stock.Part{{Seg: 3, Qty: 1, Entry: "e1"}}},
			`{"id":"o1","sku":"phone","user":"alice","qty":1,"parts":[{"segment":3,"qty":1,"entry":"e1"}]}`},
		{stock.Order{ID: "o2", SKU: "phone", User: "bob", Qty: 2, Parts: []stock.Part{{Seg: 0, Qty: 1, Entry: "e2"}, {Seg: 5, Qty: 1, Entry: "e3"}}, Deadline: deadline},
			`{"id":"o2","sku":"phone","user":"bob","qty":2,"parts":[{"segment":0,"qty":1,"entry":"e2"},{"segment":5,"qty":1,"entry":"e3"}],"deadline":"2030-01-02T03:04:05Z"}`},
	} {
		b, err := json.Marshal(tc.o)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("json.Marshal(%+v)\n got %s\nwant %s", tc.o, b, tc.want)
		}
		var back stock.Order
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, tc.o) {
			t.Errorf("round trip: %+v, want %+v", back, tc.o)
		}
	}
}
