//go:build browser

// The page in a real browser: headless Chromium, driven by chromedp, loads
// the live page, sees stock fall during a sale and saves a screenshot
// ($LOCKX_SCREENSHOT, default lockx-seckill.png in the temp dir). Gated by
// the build tag because it needs /usr/bin/chromium (Debian package chromium,
// which make test installs); make test runs it:
//
//	go test -tags browser -run PageInBrowser ./examples/seckill/shop

package shop

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/lockx-go/lockx/internal/testenv"
)

const chromium = "/usr/bin/chromium"

func TestPageInBrowser(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		if testenv.InCI() {
			t.Fatalf("%s: %v (CI=true: install the Debian package chromium)", chromium, err)
		}
		t.Skipf("%s: %v; apt-get install -y chromium", chromium, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := Open(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	svcs, urls, err := StartReplicas(ctx, b, Config{Sale: "browser-" + randomHex(4), Products: DefaultProducts(400)}, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer StopReplicas(svcs)

	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.WindowSize(1200, 1000))...)
	defer cancelAlloc()
	page, cancelPage := chromedp.NewContext(alloc)
	defer cancelPage()

	left := func() int {
		t.Helper()
		a, err := chromedp.Run(page, chromedp.AttributeValue("body", "data-left"))
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(a.Value)
		if !a.Exists || err != nil {
			return -1
		}
		return n
	}
	if err := chromedp.Do(page, chromedp.Navigate(urls[0]+"/"), chromedp.WaitVisible("#left")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for left() != 400 {
		if time.Now().After(deadline) {
			t.Fatalf("the page never showed the initial stock (400): %d", left())
		}
		time.Sleep(100 * time.Millisecond)
	}

	done := make(chan Report, 1)
	go func() {
		r, _ := RunLoad(ctx, LoadConfig{Targets: urls, Buyers: 1200, Concurrency: 16, Restock: 20})
		done <- r
	}()
	sawFall := false
	for !sawFall {
		n := left()
		sawFall = n >= 0 && n < 400
		select {
		case <-done:
			t.Fatal("the sale ended before the page showed stock falling")
		case <-time.After(100 * time.Millisecond):
		}
	}
	r := <-done
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)                                      // two refreshes: the final numbers and the rejected stale write
	png, err := chromedp.Run(page, chromedp.FullScreenshot(100)) // quality 100: PNG
	if err != nil {
		t.Fatal(err)
	}
	// The screenshot is a test artifact: $LOCKX_SCREENSHOT, or a file in the
	// temp dir. (docs/img/seckill.png is refreshed by setting it there.)
	out := os.Getenv("LOCKX_SCREENSHOT")
	if out == "" {
		out = filepath.Join(os.TempDir(), "lockx-seckill.png")
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes); page showed stock falling; sale: sold %d, left %d", out, len(png), r.Sold, r.Left)
}
