package echomw_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/labstack/echo/v4"

	"github.com/lockx-go/lockx/lockx"
	"github.com/lockx-go/lockx/lockx/memlock"
	"github.com/lockx-go/lockx/middleware/echomw"
	"github.com/lockx-go/lockx/patterns/idempotency"
)

func ExampleIdempotency() {
	locks := lockx.New(memlock.New())
	defer locks.Close()
	guard, _ := idempotency.New(locks)

	e := echo.New()
	orders := 0
	e.POST("/orders", func(c echo.Context) error {
		orders++
		return c.JSON(http.StatusCreated, map[string]int{"order": orders})
	}, echomw.Idempotency(guard))

	for range 2 {
		req := httptest.NewRequest("POST", "/orders", nil)
		req.Header.Set("Idempotency-Key", `"01HZX3V9Q8K2M4N6P8R0T2V4X6"`)
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		fmt.Print(rec.Code, " ", rec.Header().Get("Idempotent-Replayed"), " ", rec.Body.String())
	}
	// Output:
	// 201  {"order":1}
	// 201 true {"order":1}
}

func ExampleIdempotencyWithConfig() {
	locks := lockx.New(memlock.New())
	defer locks.Close()
	guard, _ := idempotency.New(locks)

	e := echo.New()
	e.Use(echomw.IdempotencyWithConfig(echomw.IdempotencyConfig{
		Guard:     guard,
		Skipper:   func(c echo.Context) bool { return c.Path() == "/health" },
		Principal: func(c echo.Context) (string, error) { return c.Request().Header.Get("X-Tenant"), nil },
	}))
	e.POST("/orders", func(c echo.Context) error { return c.NoContent(http.StatusCreated) })

	req := httptest.NewRequest("POST", "/orders", nil)
	req.Header.Set("Idempotency-Key", `"aaaaaaaaaaaa"`) // too predictable
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	// Output: 400 application/problem+json
}
