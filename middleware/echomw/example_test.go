package echomw_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/labstack/echo/v4"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/middleware/echomw"
)

func ExampleFencing() {
	e := echo.New()
	store := memlock.NewFenceStore() // redislock or pglock across replicas
	e.PUT("/docs/:id", func(c echo.Context) error {
		f, _ := echomw.FenceFromContext(c)
		return c.String(http.StatusOK, "written with token "+f.Token.String())
	}, echomw.Fencing(store))

	for _, token := range []string{"34", "33"} {
		req := httptest.NewRequest(http.MethodPut, "/docs/1", nil)
		req.Header.Set("Lock-Key", "docs/1")
		req.Header.Set("Fencing-Token", token)
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		fmt.Println(rec.Code, rec.Body.String())
	}
	// Output:
	// 200 written with token 34
	// 409 {"type":"https://github.com/lockx-go/lockx/blob/main/docs/fencing.md#stale-fencing-token","title":"Stale fencing token","status":409,"detail":"a write with token 34 has already been accepted for this resource; this lock was lost","resource":"docs/1","token":33,"seen":34}
}

func ExampleFencingWithConfig() {
	e := echo.New()
	e.PUT("/accounts/:id", func(c echo.Context) error {
		return c.NoContent(http.StatusNoContent)
	}, echomw.FencingWithConfig(echomw.FencingConfig{
		Store:       memlock.NewFenceStore(),
		KeyLookup:   "param:id", // the path names the resource
		TokenLookup: "header:Fencing-Token,query:fencing_token",
	}))
	req := httptest.NewRequest(http.MethodPut, "/accounts/42", nil) // no token
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	fmt.Println(rec.Code)
	// Output: 428
}

func ExampleSerialize() {
	locks := lockx.New(memlock.New()) // redislock or pglock across replicas
	defer locks.Close()
	e := echo.New()
	e.POST("/accounts/:id/withdraw", func(c echo.Context) error {
		l, _ := lockx.LockFromContext(c.Request().Context())
		return c.String(http.StatusOK, "withdrawn under "+l.Key())
	}, echomw.Serialize(locks, echomw.ParamKey("account:", "id")))

	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/accounts/42/withdraw", nil))
	fmt.Println(rec.Code, rec.Body.String())
	// Output: 200 withdrawn under account:42
}
