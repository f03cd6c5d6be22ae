# kmirror: the two commands a newcomer needs are `make demo` and `make test`.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: all build image demo test test-unit test-image test-helm helm-files test-e2e chaos kafka-jars bench bench-mm2 bench-wan bench-scale lint generate clean

all: build

## build: the kmirror binary in bin/
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/kmirror ./cmd/kmirror

## image: the container image without a container daemon (deploy/image, go-containerregistry):
## an OCI layout in bin/image/ and bin/kmirror-image.tar for docker/podman load; same source, same
## digest (deploy/README.md, "Container image"). IMAGE_FLAGS="-arch arm64" for another CPU.
IMAGE_FLAGS ?=
image:
	cd deploy/image && $(GO) run . -version $(VERSION) -out $(CURDIR)/bin/image -tar $(CURDIR)/bin/kmirror-image.tar $(IMAGE_FLAGS)

## demo: mirror between two embedded clusters, no setup (Ctrl-C to stop)
demo: build
	./bin/kmirror demo

## test: every test: lint, unit tests (race detector), the image's and the Helm chart's tests,
## end-to-end tests
test: lint test-unit test-image test-helm test-e2e

test-unit:
	$(GO) test -race -count=1 ./...

## test-image: builds the image twice (same digest) and checks it (deploy/image, its own module)
test-image:
	cd deploy/image && $(GO) vet ./... && $(GO) test -count=1 ./...

## test-e2e: builds kmirror and runs it as a subprocess against both backends: kfake and real
## Apache Kafka (KRaft brokers from Maven jars, fetched once into ~/.cache/kmirror; needs Java 17
## and Maven, else the real-Kafka tests skip, or fail with CI=true). KMIRROR_E2E_BACKENDS=kfake: kfake only.
## Includes a 2-minute chaos soak per backend (TestChaos, not parallel: about 5 minutes of the timeout).
KMIRROR_E2E_BACKENDS ?= all
test-e2e:
	KMIRROR_E2E_BACKENDS=$(KMIRROR_E2E_BACKENDS) $(GO) test -tags e2e -count=1 -timeout 30m -parallel 4 -v ./e2e/

## test-helm: the Helm chart deploy/helm/kmirror, in its own Go module (Helm's and Kubernetes'
## libraries stay out of kmirror's): renders it with Helm's SDK for several value sets (no cluster),
## decodes every manifest strictly into the Kubernetes API types, checks the schema's messages,
## and runs `kmirror validate` (built from this checkout) on each rendered config
test-helm:
	cd deploy/helm && $(GO) vet ./... && $(GO) test -count=1 ./...

## helm-files: refresh the chart's copies of the alert rules and the dashboard (a chart reads only
## its own files; test-helm fails while they differ from deploy/prometheus and deploy/grafana)
helm-files:
	cp deploy/prometheus/kmirror-rules.yml deploy/helm/kmirror/files/kmirror-rules.yml
	cp deploy/grafana/kmirror-dashboard.json deploy/helm/kmirror/files/kmirror-dashboard.json

## chaos: the randomized fault soak (TestChaos, e2e/chaos_test.go; issue 24): three exactly-once
## cluster-mode workers under a fault schedule drawn from SEED (kill -9, SIGSTOP, broker restarts,
## workers cut off from a cluster, topic errors, produce refusals, reloads, new topics and
## partitions, group commits), then the checks (exactly once, groups translated exactly, SIGTERM
## within shutdown_timeout, no stall past the session timeout + 10 s). `make test` runs a random seed
## for 2 minutes on each backend; this runs DURATION on CHAOS_BACKENDS (real Kafka by default) and
## writes the report to CHAOS_REPORT; CHAOS_SKIP=kill,add-partitions leaves fault kinds out. Replay a
## failure with its seed (and CHAOS_SKIP):
## make chaos SEED=1234 DURATION=30m     (the issue's run: writes bench/results/chaos.md)
SEED           ?=
DURATION       ?= 30m
CHAOS_BACKENDS ?= kafka
CHAOS_REPORT   ?= bench/results/chaos.md
CHAOS_SKIP     ?=
CHAOS_TIMEOUT  ?= 3h
chaos:
	KMIRROR_E2E_BACKENDS=$(CHAOS_BACKENDS) KMIRROR_CHAOS_SEED=$(SEED) KMIRROR_CHAOS_DURATION=$(DURATION) KMIRROR_CHAOS_SKIP=$(CHAOS_SKIP) \
	KMIRROR_CHAOS_REPORT=$(abspath $(CHAOS_REPORT)) \
		$(GO) test -tags e2e -count=1 -timeout $(CHAOS_TIMEOUT) -v -run '^TestChaos$$' ./e2e/

## kafka-jars: fetch the Apache Kafka jars the e2e tests run (once per machine; CI does it first)
kafka-jars:
	$(GO) run ./e2e/kafkatest/cmd/kafkatest fetch

## bench: kmirror against a plain consume-then-produce loop on the same clusters (records/s, MB/s,
## latency p50/p99, ratio), then the Go benchmarks: offset storage per codec, translation lookups/s,
## one plugin filter pass over 100,000 topics, and what a listener plugin that sleeps 30 s per call
## costs in throughput (kfake)
## (contenders limit,kmirror by default; kmirror-eos and kmirror-eos-2w measure exactly-once, one
## and two workers)
BENCH_FLAGS ?= -records 1000000 -runs 3
bench:
	$(GO) run ./bench $(BENCH_FLAGS)
	$(GO) test -run '^$$' -bench 'OffsetStorage|Translate' -benchtime 3x ./connector
	$(GO) test -run '^$$' -bench 'FilterTopics100k|Start' -benchtime 3x ./plugins
	KMIRROR_E2E_MEASURE=1 KMIRROR_E2E_BACKENDS=kfake $(GO) test -tags e2e -count=1 -v -run '^TestListenerSlowThroughput$$' ./e2e/

## bench-mm2: kmirror side by side with MirrorMaker 2 and the limit on real Apache Kafka 4.3.1
## (throughput, latency, startup with 1,000 topics, failover re-delivery, compressed topics;
## throughput and latency again with exactly-once: kmirror-eos and mm2-eos); needs Java 17 and Maven
## like test-e2e; writes bench/results/latest.md (the kfake bench writes kfake-latest.md).
## The throughput phase also times `kmirror verify` over kmirror's and kmirror-eos's copy
## (records compared per second vs the copy's, goal ≥ 0.8×; issue 26): -verify=false skips it. Smoke run:
## make bench-mm2 BENCH_MM2_FLAGS="-records 200000 -latency-duration 10s -startup-topics 100 -compressed-records 200000 -out ''"
BENCH_MM2_FLAGS ?=
bench-mm2:
	$(GO) run ./bench/mm2 $(BENCH_MM2_FLAGS)

## bench-wan: bench-mm2's wan phase (issue 27; about 80 minutes, so not in bench-mm2's default phases):
## the contender reaches the source through a latency proxy (e2e/kafkatest/faultproxy) adding
## -wan-rtts round trips (0,40,80,150ms) and holding each connection to the TCP receive window
## its client advertises per round trip, as a real link does, on topics of -wan-partitions (1,16): backlog records/s and
## CPU s/GB (a copy done inside -wan-window, 15s, runs -wan-repeats (3) times, the median kept), p99 at 5,000 records/s; contenders limit, kmirror, mm2-defaults (MM2 as it comes: tasks.max 1, Java client defaults), mm2
## (a task per partition) and mm2-wan (MM2 tuned for a high-latency link). Then kmirror's extras (-wan-extras=false skips them; about 20 minutes) at
## -wan-extras-rtt 80ms on 16 partitions: rate_limit -wan-rate-limit (20MB) on a saturated source,
## bytes copied over -wan-rate-window (30s) against the limit (goal: within 5%); and the link down for
## -wan-outage (5m) under -wan-outage-rate (10,000 records/s), the catch-up after it without and
## with the limit. Writes bench/results/wan.md (same as
## make bench-mm2 BENCH_MM2_FLAGS="-phases wan"). Smoke runs:
## make bench-wan BENCH_WAN_FLAGS="-contenders kmirror,mm2 -wan-records 100000 -wan-rtts 0,80ms -wan-partitions 1 -wan-latency-duration 5s -wan-extras=false -out ''"
## make bench-wan BENCH_WAN_FLAGS="-contenders kmirror -wan-records 20000 -wan-rtts 0 -wan-partitions 1 -wan-latency-duration 2s -wan-rate-window 10s -wan-outage 20s -out ''"
BENCH_WAN_FLAGS ?=
bench-wan:
	$(GO) run ./bench/mm2 -phases wan $(BENCH_WAN_FLAGS)

## bench-scale: kmirror (at least once, and kmirror-eos: exactly once) and the plain loop with
## many partitions, one worker: start to every partition's first record, peak RSS, idle and
## trickle CPU, memory over the trickle, restart time;
## 100,000 partitions on kfake, then 10,000 on real Apache Kafka 4.3.1 (Java and Maven as
## test-e2e), where MirrorMaker 2 runs too; writes bench/results/scale-kfake.md and
## scale-kafka.md. Smoke run:
## make bench-scale BENCH_SCALE_FLAGS="-topics 200 -partitions 5 -idle 3s -trickle 5s -out -"
## To profile kmirror under a bench: GOFLAGS=-tags=pprof KMIRROR_PPROF=127.0.0.1:6061 make bench-scale
## (cmd/kmirror/pprof.go serves net/http/pprof there; not in release builds)
BENCH_SCALE_FLAGS ?=
bench-scale:
	$(GO) run ./bench/scale -backend kfake $(BENCH_SCALE_FLAGS)
	$(GO) run ./bench/scale -backend kafka $(BENCH_SCALE_FLAGS)

## lint: go vet (both build tags) and gofmt
lint:
	$(GO) vet ./...
	$(GO) vet -tags e2e ./e2e/...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## generate: regenerate the plugin protocol's Go code (committed; CI never runs protoc)
# Tools, once per machine (the versions the committed code was made with):
#   apt-get install protobuf-compiler          # protoc (Debian's, libprotoc 3.21.12)
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
#   go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
# protoc finds the two plugins on PATH; $(go env GOPATH)/bin is added here.
PROTOC ?= protoc
PLUGIN_PROTOS := $(wildcard plugins/v1/proto/kmirror/plugin/v1/*.proto)
generate:
	PATH="$$($(GO) env GOPATH)/bin:$$PATH" $(PROTOC) -I plugins/v1/proto \
		--go_out=. --go_opt=module=github.com/kmirror/kmirror \
		--go-grpc_out=. --go-grpc_opt=module=github.com/kmirror/kmirror \
		$(PLUGIN_PROTOS)
	$(GO) generate ./...

clean:
	rm -rf bin
