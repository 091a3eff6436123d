# The README's two commands: `make demo` and `make test`. Both work on a fresh machine.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
CQ     := $(VENV)/bin/cq
STAMP  := $(VENV)/.installed
FLINK_VENV  := .venv-flink
FLINK_STAMP := $(FLINK_VENV)/.installed
FLINK_VERSION := 2.3.0
QUIX_VENV   := .venv-quix
QUIX_STAMP  := $(QUIX_VENV)/.installed
QUIX_VERSION := 3.28.1
HELM_VERSION := v3.22.0
HELM        := .tools/helm-$(HELM_VERSION)/helm
CHROMIUM    := /usr/bin/chromium
# kube-apiserver's version is the one tools/kube-apiserver/go.mod requires
KUBE_VERSION   := $(shell sed -n 's/^[[:space:]]*k8s.io\/kubernetes \(v[0-9.]*\)$$/\1/p' tools/kube-apiserver/go.mod)
KUBE_APISERVER := .tools/kube-apiserver-$(KUBE_VERSION)/kube-apiserver
ETCD           := /usr/bin/etcd

.PHONY: demo test lint unit property golden bench bench-deps bench-quick nexmark clean image image-local ui browser

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev,batch,bench]"
	# .pyc files for the checkout (the environment may set PYTHONDONTWRITEBYTECODE): every
	# `cq` process the tests start imports them instead of compiling the package again
	$(PY) -m compileall -q cq_service
	touch $(STAMP)

# PyFlink for the NEXMark and Kafka benchmarks, in a venv of its own (it pins an older
# pyarrow). The jars its peers need (cq_service/bench/peers/flink-jars.txt: parquet format,
# Hadoop client, Kafka connector) come from Maven Central into ~/.m2 (maven_jars.py; a jar
# already there is kept).
FLINK_JARS := cq_service/bench/peers/flink-jars.txt
FLINK_JARS_STAMP := $(FLINK_VENV)/.jars
$(FLINK_JARS_STAMP): $(FLINK_JARS) $(FLINK_STAMP)
	$(FLINK_VENV)/bin/python cq_service/bench/peers/maven_jars.py
	touch $(FLINK_JARS_STAMP)

$(FLINK_STAMP):
	$(PYTHON) -m venv $(FLINK_VENV)
	$(FLINK_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(FLINK_VENV)/bin/python -m pip install --quiet "apache-flink==$(FLINK_VERSION)"
	touch $(FLINK_STAMP)

# Quix Streams for `cq bench kafka`, in a venv of its own: it pins confluent-kafka < 2.13,
# older than ours.
$(QUIX_STAMP):
	$(PYTHON) -m venv $(QUIX_VENV)
	$(QUIX_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(QUIX_VENV)/bin/python -m pip install --quiet "quixstreams==$(QUIX_VERSION)"
	touch $(QUIX_STAMP)

bench-deps: $(STAMP) $(FLINK_STAMP) $(FLINK_JARS_STAMP) $(QUIX_STAMP)

demo: $(STAMP)
	$(CQ) validate pipelines/examples/web-proxy/pipeline.yaml
	$(CQ) explain pipelines/examples/web-proxy/pipeline.yaml
	$(CQ) run pipelines/examples/web-proxy/pipeline.yaml --stats
	@echo
	@echo "== results (pipelines/examples/web-proxy/out/) =="
	@for f in pipelines/examples/web-proxy/out/*.jsonl; do echo "-- $$f"; head -n 12 $$f; done

lint: $(STAMP)
	$(VENV)/bin/ruff check .

# pytest exits 5 when it collected nothing: an empty selection is a failure, not a pass.
# Then the quick NEXMark run: q0-q8 on cq, Spark and Flink, failing if any results disagree.
test: $(STAMP) lint bench-deps services $(HELM) $(KUBE_APISERVER) $(ETCD) $(CHROMIUM) containers-if-docker
	HELM=$(CURDIR)/$(HELM) KUBE_APISERVER=$(CURDIR)/$(KUBE_APISERVER) $(PY) -m pytest -q -n 2 -p no:cacheprovider tests; status=$$?; \
	if [ $$status -eq 5 ]; then echo "no tests were collected" >&2; exit 1; fi; exit $$status
	$(CQ) bench nexmark --quick

# Debian's Chromium for the browser tests (tests/browser: Playwright drives it headless; its own
# browsers are never downloaded). Installed with apt-get when absent (as root).
$(CHROMIUM):
	apt-get update -qq && apt-get install -y -qq chromium

browser: $(STAMP) $(CHROMIUM)
	$(PY) -m pytest -q -p no:cacheprovider tests/browser

# The web view's assets (web/ -> cq_service/service/ui_static, committed): needs Node and npm
# (packages from the npm registry, cached in ~/.npm); `make test` and `pip install` do not.
ui:
	cd web && npm ci --cache $(HOME)/.npm && npm run build

# Helm, built from the Go module proxy into the git-ignored .tools/ (about 3 minutes cold; the
# Go module cache makes later builds quick). tests/deploy runs it ($HELM) on helm/cq-service.
# The -X flags are those of Helm's own release build: without them `helm version` has no patch
# and `helm template`/`lint` assume Kubernetes 1.20 (its k8s.io modules are 0.37: 1.37).
HELM_LDFLAGS := -X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
  $(foreach p,pkg/lint/rules pkg/chartutil,-X helm.sh/helm/v3/$(p).k8sVersionMajor=1 -X helm.sh/helm/v3/$(p).k8sVersionMinor=37)
$(HELM):
	GOBIN=$(CURDIR)/$(dir $(HELM)) go install -ldflags '$(HELM_LDFLAGS)' helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

# A Kubernetes API server for tests/deploy/test_install.py (`helm install`/`upgrade` of the
# chart), built from the Go module proxy through the wrapper module tools/kube-apiserver (it
# pins k8s.io/kubernetes' staging modules to their v0.x releases) into .tools/, and run against
# Debian's etcd. Cold (empty Go caches): about 20 minutes on 2 busy cores, nearly all of it
# compiling; from a warm cache, 20 s of linking; nothing once built. The -X flags give the
# server its version (helm checks the chart's kubeVersion against it).
KUBE_MINOR := $(word 2,$(subst ., ,$(KUBE_VERSION)))
KUBE_LDFLAGS := -s -w $(foreach v,gitVersion=$(KUBE_VERSION) gitMajor=1 gitMinor=$(KUBE_MINOR) \
  gitTreeState=clean,-X k8s.io/component-base/version.$(v))
$(KUBE_APISERVER):
	cd tools/kube-apiserver && go build -trimpath -buildvcs=false -ldflags '$(KUBE_LDFLAGS)' -o $(CURDIR)/$(KUBE_APISERVER) .

# etcd for that API server: Debian's etcd-server (as root) unless an etcd is on the PATH. It is
# only run by the tests, on free 127.0.0.1 ports (the package starts no service here).
$(ETCD):
	command -v etcd >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  apt-get install -y -qq -o DPkg::Lock::Timeout=600 etcd-server; }

# The worker's image (docker/Dockerfile), from IMAGE_BASE (any Debian-like image with Python
# 3.11+ and venv). Needs a Docker daemon; not part of `make test`. Where no registry can be
# reached, `make image-local` bootstraps a Debian base first (docker/debian-base.sh, as root).
# pip's CA bundle ($PIP_CERT, if set) is lent to the build for a TLS-intercepting proxy. The
# build uses BuildKit: DOCKER is a client that has it (a recent one needs buildx; Debian's
# docker.io client, /usr/bin/docker, has it built in).
DOCKER     ?= docker
IMAGE      ?= cq-service:0.1.0
IMAGE_BASE ?= python:3.11-slim
LOCAL_BASE := cq-debian-base:bookworm
comma := ,
image:
	DOCKER_BUILDKIT=1 $(DOCKER) build -f docker/Dockerfile --build-arg BASE=$(IMAGE_BASE) \
	  $(if $(PIP_CERT),--secret id=pip-cert$(comma)src=$(PIP_CERT)) -t $(IMAGE) .

# (image-local's base has only what the worker needs; LOCAL_BASE, that of `make containers`,
# also has Kafka's and PostgreSQL's packages.)
LOCAL_WORKER_BASE := cq-debian-base:bookworm-worker
image-local:
	DOCKER=$(DOCKER) PACKAGES=python3,python3-venv,ca-certificates,git \
	  docker/debian-base.sh $(LOCAL_WORKER_BASE)
	$(MAKE) image IMAGE_BASE=$(LOCAL_WORKER_BASE)

# The images of tests/containers, built here with no registry (README "Testing with
# containers"): Docker is started when none answers (docker/dockerd.sh; Debian's docker.io and
# debootstrap are apt-installed when absent, as root); the Debian base, with the packages all
# three images need, is bootstrapped once (root file system and .debs cached in
# ~/.cache/cq-containers) while the worker's dependencies are built here as wheels from pip's
# cache (docker/wheels); then the worker, Kafka (the jars of `make services`) and PostgreSQL
# (Debian's) are built at once, cached by Docker's layer cache (tests/containers/images.py).
# Builds use Debian's client (/usr/bin/docker: BuildKit built in). `make test` builds them when
# a daemon can run (containers-if-docker) and else the e2e test falls back.
DOCKERD     := /usr/sbin/dockerd
DEBOOTSTRAP := /usr/sbin/debootstrap
DEB_DOCKER  := /usr/bin/docker
.PHONY: containers containers-if-docker
containers: $(STAMP) $(DOCKERD) $(DEBOOTSTRAP)
	DOCKER=$(DEB_DOCKER) docker/dockerd.sh
	$(PY) -m tests.containers.images wheels & wheels=$$!; \
	DOCKER=$(DEB_DOCKER) docker/debian-base.sh $(LOCAL_BASE); status=$$?; \
	wait $$wheels && exit $$status
	DOCKER=$(DEB_DOCKER) CQ_WORKER_IMAGE=$(IMAGE) $(PY) -m tests.containers.images build $(LOCAL_BASE)

containers-if-docker: $(DOCKERD) $(DEBOOTSTRAP)
	if DOCKER=$(DEB_DOCKER) docker/dockerd.sh; then $(MAKE) containers; \
	else echo "no Docker daemon: tests/containers runs on the local services" >&2; fi

$(DOCKERD) $(DEBOOTSTRAP):
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  apt-get install -y -qq -o DPkg::Lock::Timeout=600 docker.io debootstrap

# Kafka 4 (KRaft, 127.0.0.1:19092) and PostgreSQL (127.0.0.1:15432) for the integration tests;
# idempotent, state in .services/ (tests/services). `services-down` stops both, keeps the caches.
.PHONY: services services-down
services: $(STAMP)
	$(PY) -m tests.services up

services-down: $(STAMP)
	$(PY) -m tests.services down

# Something live to look at: the services, the NEXMark topics, `cq nexmark produce` in the
# background, pipelines/nexmark/kafka served by `cq serve` (fresh state in .cq/demo-service),
# and the /ui address. Ctrl-C stops it all. DEMO_SERVICES= uses services already running.
DEMO_RATE     ?= 1000
DEMO_PORT     ?= 8080
DEMO_TOKEN    ?= demo
DEMO_KAFKA    ?= 127.0.0.1:19092
DEMO_SERVICES ?= services
DEMO_STATE    := .cq/demo-service
.PHONY: demo-service
demo-service: $(DEMO_SERVICES)
	@rm -rf $(DEMO_STATE) && mkdir -p $(DEMO_STATE)
	@export CQ_KAFKA_BOOTSTRAP=$(DEMO_KAFKA) CQ_TOKEN=$(DEMO_TOKEN); \
	$(CQ) nexmark topics pipelines/nexmark/kafka/nexmark.yaml || exit 1; \
	pids=; trap 'trap - INT TERM EXIT; kill $$pids 2>/dev/null; wait' INT TERM EXIT; \
	$(CQ) serve --pipelines pipelines/nexmark/kafka --catalog sqlite:///$(DEMO_STATE)/catalog.db \
	  --port $(DEMO_PORT) --name demo >$(DEMO_STATE)/worker.log 2>&1 & pids=$$!; \
	until curl -sf http://127.0.0.1:$(DEMO_PORT)/readyz >/dev/null; do \
	  kill -0 $$pids 2>/dev/null || { cat $(DEMO_STATE)/worker.log; exit 1; }; sleep 0.5; done; \
	$(CQ) nexmark produce --rate $(DEMO_RATE) & pids="$$pids $$!"; \
	echo "web view: http://127.0.0.1:$(DEMO_PORT)/ui/ (API token $(DEMO_TOKEN)); worker log" \
	  "$(DEMO_STATE)/worker.log; Ctrl-C stops it all"; \
	wait

# NEXMark q0-q8 on cq, Spark and Flink over a small input: fails if any results disagree
# (part of `make test`).
bench-quick: bench-deps
	$(CQ) bench nexmark --quick

# The full NEXMark run whose table is in the README (5 M events, 3 runs each: about an hour on
# 2 cores, most of it Spark's and Flink's).
nexmark: bench-deps
	$(CQ) bench nexmark --events 5000000 --repeat 3

unit: $(STAMP)
	$(PY) -m pytest -q tests/unit

property: $(STAMP)
	$(PY) -m pytest -q -m property tests/property

golden: $(STAMP)
	$(PY) -m pytest -q tests/golden

# BENCH_ARGS picks rows (benchmarks/engine_core.py): e.g. BENCH_ARGS="--quick" or
# BENCH_ARGS="--groups-only --groups 100000 --ratios 10".
BENCH_ARGS ?=
bench: $(STAMP)
	$(PY) benchmarks/engine_core.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(FLINK_VENV) .pytest_cache .ruff_cache .hypothesis
