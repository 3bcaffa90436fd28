package echomw_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/middleware"
	"github.com/lockx-go/lockx/middleware/echomw"
)

// The attack of middleware's TestSignedTokensRefuseForgery, through Echo: a
// forged highest token must not reach the store.
func TestSignedTokensRefuseForgery(t *testing.T) {
	ctx := context.Background()
	key := []byte("resource-and-lock-side-shared-key")
	store := memlock.NewFenceStore()
	e := echo.New()
	e.PUT("/x", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) },
		echomw.FencingWithConfig(echomw.FencingConfig{Store: store, TokenVerificationKey: key}))
	c := lockx.New(memlock.New(), lockx.WithTokenSigning(key))
	defer c.Close()
	l, err := c.Acquire(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	forger, _ := lockx.NewTokenSigner([]byte("not the shared key, but long"))
	if rec := serve(e, "PUT", "/x", "Lock-Key", "r", "Fencing-Token", lockx.MaxToken.String()); rec.Code != 428 || !strings.Contains(rec.Body.String(), "signed-fencing-token-required") {
		t.Errorf("unsigned: %d %s", rec.Code, rec.Body)
	}
	if rec := serve(e, "PUT", "/x", "Lock-Key", "r", "Fencing-Token", lockx.MaxToken.String(), middleware.HeaderTokenSignature, forger.Sign("r", lockx.MaxToken)); rec.Code != 403 || !strings.Contains(rec.Body.String(), "forged-fencing-token") {
		t.Errorf("forged: %d %s", rec.Code, rec.Body)
	}
	if rec := serve(e, "PUT", "/x", "Lock-Key", "r", "Fencing-Token", l.Token().String(), middleware.HeaderTokenSignature, l.TokenSignature()); rec.Code != 204 {
		t.Fatalf("the holder's signed token: %d %s", rec.Code, rec.Body)
	}
}
