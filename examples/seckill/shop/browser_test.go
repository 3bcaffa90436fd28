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

// text is the text of the page's element sel.
func text(t *testing.T, page context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(page, chromedp.TextContent(sel))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// number is the number the page shows in sel, -1 before the first refresh.
func number(t *testing.T, page context.Context, sel string) int {
	t.Helper()
	n, err := strconv.Atoi(text(t, page, sel))
	if err != nil {
		return -1
	}
	return n
}

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
	// The sale progresses on the page: stock falls while the sold count
	// rises, and at some refresh orders/s is above zero.
	sawFall, sawSold, sawRate := false, false, false
	for !sawFall || !sawSold || !sawRate {
		n := left()
		sawFall = sawFall || n >= 0 && n < 400
		sawSold = sawSold || number(t, page, "#sold") > 0
		sawRate = sawRate || number(t, page, "#ops") > 0
		select {
		case <-done:
			t.Fatalf("the sale ended before the page showed it progressing: stock falling %v, sold rising %v, orders/s above 0 %v", sawFall, sawSold, sawRate)
		case <-time.After(100 * time.Millisecond):
		}
	}
	r := <-done
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
	// The page ends on the sale's numbers: what is left, what was sold, the
	// stale admin write refused, nothing oversold.
	deadline = time.Now().Add(10 * time.Second)
	for {
		got := [...]int{left(), number(t, page, "#sold"), number(t, page, "#stale")}
		want := [...]int{int(r.Left), int(r.Sold), int(r.StaleRejected)}
		if got == want && r.StaleRejected == 1 && text(t, page, "#oversold") == "0 · 0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the page shows left, sold, stale writes rejected = %v and oversold · duplicates %q; the sale ended at %v, 0 · 0",
				got, text(t, page, "#oversold"), want)
		}
		time.Sleep(100 * time.Millisecond)
	}
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
