# The README's two commands: `make demo` and `make test`. Both work on a fresh machine.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
CQ     := $(VENV)/bin/cq
STAMP  := $(VENV)/.installed

.PHONY: demo test lint unit property golden bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

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
test: $(STAMP) lint
	$(PY) -m pytest -q -n 2 -p no:cacheprovider tests; status=$$?; \
	if [ $$status -eq 5 ]; then echo "no tests were collected" >&2; exit 1; fi; exit $$status

unit: $(STAMP)
	$(PY) -m pytest -q tests/unit

property: $(STAMP)
	$(PY) -m pytest -q -m property tests/property

golden: $(STAMP)
	$(PY) -m pytest -q tests/golden

bench: $(STAMP)
	$(PY) benchmarks/engine_core.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
