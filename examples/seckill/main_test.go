package main

import (
	"context"
	"os"
	"strings"
	"testing"
)

func TestSaleSellsExactlyTheStock(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := run(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	out, _ := os.ReadFile(f.Name())
	if !strings.Contains(string(out), "bought 100 of 100") || !strings.Contains(string(out), "oversold 0") {
		t.Fatalf("unexpected output:\n%s", out)
	}
}
