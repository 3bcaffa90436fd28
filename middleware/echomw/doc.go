// Package echomw is lockx's fencing and per-resource locking for Echo v4, in
// Echo's own shape: a config struct with Skipper first, a Default config,
// X() and XWithConfig(), a pluggable Store and errors as *echo.HTTPError
// with Internal set. The logic is package middleware's; this package adapts
// it.
//
//	e := echo.New()
//	store := memlock.NewFenceStore() // redislock, pglock across replicas
//	e.PUT("/docs/:id", putDoc, echomw.Fencing(store))
//
//	locks := lockx.New(backend)
//	e.POST("/accounts/:id/withdraw", withdraw, echomw.Serialize(locks, echomw.ParamKey("account:", "id")))
package echomw
