# Front door: `make run` starts the service, `make test` runs the suite.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Extra pip options for the torch install only (e.g. a CPU-only wheel index).
TORCH_PIP_OPTS ?=
LOCOMO ?= ../shared/data/locomo/locomo10.json
CONVERSATION ?= 0

.PHONY: install run test test-unit replay bench clean lint

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	# CPU torch first: anything that pulls torch later must find it already installed.
	$(BIN)/pip install $(TORCH_PIP_OPTS) "torch==2.13.0"
	$(BIN)/pip install -e ".[test,reliability,dev]"
	touch $(STAMP)

install: $(STAMP) ## create .venv and install the service

run: $(STAMP) ## serve the API on 127.0.0.1 with embedded PostgreSQL and in-process workers
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m service serve

test: $(STAMP) ## the whole test suite
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m pytest

LINT_PATHS := service filter tests bench migrations

lint: $(STAMP) ## ruff check + ruff format --check (rules in pyproject.toml)
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)

test-unit: $(STAMP) ## pure tests only (no database, network or model)
	$(BIN)/python -m pytest tests/unit

replay: $(STAMP) ## replay a LoCoMo conversation through the filter and the service, batched and per turn
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m bench.replay_locomo \
		--data $(LOCOMO) --conversation $(CONVERSATION)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m bench.replay_locomo \
		--data $(LOCOMO) --conversation $(CONVERSATION) --extraction per-turn

bench: $(STAMP) ## benchmarks: replay, LoCoMo retrieval, latency at scale, per-owner index recall (bench/results/)
	$(BIN)/pip install -e ".[bench]"
	$(MAKE) replay
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m bench.locomo_retrieval --data $(LOCOMO)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m bench.multilingual_retrieval
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m bench.latency_scale
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m bench.ann_recall --data $(LOCOMO)

clean: ## remove the virtual environment and local state
	rm -rf $(VENV) .state

.PHONY: e2e
e2e: $(STAMP) ## end-to-end tests against a real Open WebUI 0.12.4 (installs into .e2e/ once)
	bash tests/e2e/setup.sh && E2E_OPENWEBUI=1 HF_HUB_OFFLINE=1 $(BIN)/python -m pytest tests/e2e -m e2e

# --- reliability: fault injection, load and API fuzz, with figures (short enough for CI) ----
LOAD_USERS ?= 20
LOAD_SECONDS ?= 30
FUZZ_CASES ?= 200
RELIABILITY_OUT ?= bench/results/reliability

.PHONY: reliability
reliability: $(STAMP) ## fault, load (20 users x 30 s) and fuzz (200 cases) runs; figures in bench/results/reliability/
	$(BIN)/pip install -q -e ".[test,reliability]"
	rm -rf $(RELIABILITY_OUT) && mkdir -p $(RELIABILITY_OUT)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 RELIABILITY_RESULTS=$(RELIABILITY_OUT) \
		RELIABILITY_FUZZ_CASES=$(FUZZ_CASES) RELIABILITY_FUZZ_TIME_S=300 \
		$(BIN)/python -m pytest tests/reliability -q -rxX
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m bench.load_test \
		--users $(LOAD_USERS) --duration-s $(LOAD_SECONDS) --out $(RELIABILITY_OUT)/load.json
	$(BIN)/python -m bench.reliability_summary $(RELIABILITY_OUT)
