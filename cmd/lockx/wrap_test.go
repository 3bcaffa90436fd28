package main

import (
	"testing"

	"github.com/lockx-go/lockx/internal/captest"
	"github.com/lockx-go/lockx/lockx/driver"
)

// TestNoCloseKeepsCapabilities: the CLI's noClose wrapper hides no
// capability of the backend it wraps.
func TestNoCloseKeepsCapabilities(t *testing.T) {
	captest.Check(t, func(b driver.Backend) driver.Backend { return noClose{b} })
}
