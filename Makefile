# kmirror: the two commands a newcomer needs are `make demo` and `make test`.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: all build demo test test-unit test-e2e bench lint generate clean

all: build

## build: the kmirror binary in bin/
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/kmirror ./cmd/kmirror

## demo: mirror between two embedded clusters, no setup (Ctrl-C to stop)
demo: build
	./bin/kmirror demo

## test: every test: lint, unit tests (race detector) and end-to-end tests
test: lint test-unit test-e2e

test-unit:
	$(GO) test -race -count=1 ./...

## test-e2e: builds kmirror and runs it as a subprocess against real clusters
test-e2e:
	$(GO) test -tags e2e -count=1 -timeout 20m ./e2e/...

## bench: kmirror against a plain consume-then-produce loop on the same clusters
bench:
	$(GO) run ./bench $(BENCH_FLAGS)

## lint: go vet (both build tags) and gofmt
lint:
	$(GO) vet ./...
	$(GO) vet -tags e2e ./e2e/...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## generate: regenerate generated code (protobuf, once the plugin protocol lands)
generate:
	$(GO) generate ./...

clean:
	rm -rf bin
