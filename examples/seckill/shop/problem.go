package shop

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/lockx-go/lockx/middleware"
)

// problemType is the Type of the service's own problem answers: the table
// of answers in docs/seckill.md. The middleware's problems keep theirs.
const problemType = "https://github.com/lockx-go/lockx/blob/main/docs/seckill.md#answers"

// answer writes an error answer as application/problem+json (RFC 9457),
// the form of every error the service sends.
func answer(c echo.Context, status int, title string, err error) error {
	p := &middleware.Problem{Type: problemType, Title: title, Status: status, Err: err}
	if err != nil {
		p.Detail = err.Error()
	}
	return writeProblem(c, p)
}

func writeProblem(c echo.Context, p *middleware.Problem) error {
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "application/problem+json")
	p.SetHeaders(h)
	if c.Request().Method == http.MethodHead {
		return c.NoContent(p.Status)
	}
	return c.JSON(p.Status, p)
}

// problemHandler is the service's Echo error handler, so that errors from
// middleware and from Echo itself (404 for an unknown route, 405) are
// problem answers too: a *middleware.Problem is sent as it is, any other
// error as a problem with the status's text as title.
func problemHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var p *middleware.Problem
	if !errors.As(err, &p) {
		p = &middleware.Problem{Type: problemType, Status: http.StatusInternalServerError, Err: err}
		var he *echo.HTTPError
		if errors.As(err, &he) {
			p.Status = he.Code
			if msg := fmt.Sprint(he.Message); msg != http.StatusText(he.Code) {
				p.Detail = msg
			}
		}
		p.Title = http.StatusText(p.Status)
	}
	if werr := writeProblem(c, p); werr != nil {
		c.Logger().Error(werr)
	}
}
