# lockx build entry points. `make test` is what CI runs (.ci/run).

GO ?= go
# staticcheck 2026.2.x, which supports Go 1.26.
STATICCHECK_VERSION ?= v0.8.2
STATICCHECK = $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
# Every module in the tree (the root and nested ones such as bench/).
MODULES = $(patsubst %/go.mod,%,$(shell find . -name go.mod -not -path '*/testdata/*' -not -path '*/vendor/*' | sort))

.DEFAULT_GOAL := test
.PHONY: test services bench bench-patterns lint fmt faults

## test: the whole suite, unit and integration, race detector on. The
## browser and fuzzing runs use -race too, so that they reuse the first run's
## compiled packages (without it a cold build compiles every dependency twice).
## The date-sensitive packages run a second time with their wall clock moved
## 400 days ahead (internal/testenv, LOCKX_TEST_CLOCK_OFFSET): a test that
## only passes near the day it was written fails today, not next year. The
## fleet tests are left out of that run: they inject clocks of their own.
## The first run tests four packages at a time (-p 4, on two cores): most
## tests wait on leases, servers and timers, not on the CPU (go test's
## default of one package per core left the cores 43 % busy for 9m40s).
test: services
	$(GO) test -race -count=1 -p 4 -timeout 9m ./...
	LOCKX_TEST_CLOCK_OFFSET=+400d $(GO) test -race -count=1 -timeout 3m -skip '^TestFleet' ./patterns/cronguard/... ./cmd/lockx/
	cd lockx/etcdlock && $(GO) test -race -count=1 -timeout 5m ./...
	$(GO) test -race -count=1 -timeout 3m -tags browser -run PageInBrowser ./examples/seckill/shop/
	LOCKX_FUZZTIME=2s $(GO) test -race -count=1 -timeout 5m -run '^TestFaultFuzz$$' ./faults/

## services: install/start Redis, PostgreSQL and MariaDB as needed.
services:
	scripts/ensure-services.sh

## bench: side-by-side benchmarks against the peers (bench/ module).
bench:
	@if [ ! -d bench ]; then echo "make bench: bench/ does not exist yet (the benchmark module is not built)" >&2; exit 1; fi
	scripts/ensure-services.sh
	cd bench && $(GO) run ./cmd/lockxbench
	$(MAKE) bench-patterns

## bench-patterns: the pattern and middleware benchmarks (go test -bench):
## idempotency replay and fencing-check overhead over HTTP, stock modes,
## rwlock and semaphore, telemetry overhead, Redlock, MySQL (session and lease
## table beside the naive table lock), PostgreSQL's hot key split into
## its raw floors. Ratios are within one run.
bench-patterns:
	$(GO) test -run '^$$' -bench 'IdempotencyPaired|FencingRatio' -benchtime 20000x -count 3 ./middleware/
	$(GO) test -run '^$$' -bench 'BenchmarkRedisStock' -benchtime 3s -count 3 ./patterns/stock/
	$(GO) test -run '^$$' -bench . -benchtime 2s ./patterns/rwlock/ ./patterns/semaphore/
	$(GO) test -run '^$$' -bench 'Overhead' -benchmem -count 3 ./lockx/lockxotel/
	$(GO) test -run '^$$' -bench 'Quorum' -benchmem ./lockx/redislock/
	$(GO) test -run '^$$' -bench . -benchtime 2s -count 3 ./lockx/mysqllock/
	$(GO) test -run '^$$' -bench 'HotKey' -benchtime 4s -count 2 ./lockx/pglock/

## lint: gofmt, go vet and staticcheck over every module.
lint:
	@unformatted=$$(gofmt -l .); if [ -n "$$unformatted" ]; then \
		echo "gofmt: these files are not formatted (run make fmt):" >&2; echo "$$unformatted" >&2; exit 1; fi
	@set -e; for m in $(MODULES); do \
		echo "go vet: $$m"; (cd $$m && $(GO) vet ./...); \
		echo "staticcheck: $$m"; (cd $$m && $(STATICCHECK) ./...); \
	done

## fmt: format every Go file.
fmt:
	gofmt -w .

## faults: the long fault-injection suite.
faults:
	@if [ ! -d faults ]; then echo "make faults: ./faults is not built yet" >&2; exit 1; fi
	scripts/ensure-services.sh
	LOCKX_FAULTS=long $(GO) test -race -count=1 -timeout 40m -run Fault -v ./faults/...
