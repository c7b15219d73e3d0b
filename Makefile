# Two commands set up and run everything on a new machine: `make demo` and `make test`.
# Each installs what it needs into .venv; a stamp keyed on pyproject.toml's content makes
# later runs skip the install.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
KEY := $(shell sha256sum pyproject.toml | cut -c1-16)
TORCH := torch==2.13.0
TORCH_INDEX ?=

# make demo PORT=8600 serves the dashboard on another port.
PORT ?= 8501

.PHONY: demo test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# torch first, pinned: left to resolve torch itself, pip takes the newest release, which on
# Linux from PyPI is a CUDA build (several GB of nvidia-* wheels). TORCH_INDEX picks another
# index, e.g. make demo TORCH_INDEX=https://download.pytorch.org/whl/cpu for the CPU build.
$(VENV)/.torch: | $(BIN)/python
	$(BIN)/pip install --quiet $(TORCH) $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
	touch $@

$(VENV)/.core-$(KEY): | $(VENV)/.torch
	$(BIN)/pip install --quiet -e . $(TORCH)
	rm -f $(VENV)/.core-*; touch $@

$(VENV)/.test-$(KEY): $(VENV)/.core-$(KEY)
	$(BIN)/pip install --quiet -e '.[test]' $(TORCH)
	rm -f $(VENV)/.test-*; touch $@

$(VENV)/.dashboard-$(KEY): $(VENV)/.core-$(KEY)
	$(BIN)/pip install --quiet -e '.[dashboard]' $(TORCH)
	rm -f $(VENV)/.dashboard-*; touch $@

$(VENV)/.bench-$(KEY): $(VENV)/.core-$(KEY)
	$(BIN)/pip install --quiet -e '.[bench]' $(TORCH)
	rm -f $(VENV)/.bench-*; touch $@

# A fresh demo training run in runs/demo (paced to last ~5 minutes) and the dashboard on it,
# from the run's first checkpoint (seconds in). `bufcore demo --dashboard` does the work
# (bufcore/runs/demo/serve.py, tested there): it clears a previous demo run, or moves it aside
# to runs/demo.<date>-<time> when it holds checkpoints saved from the dashboard; Ctrl-C or
# kill stops both; a failure of either stops both with its message last.
demo: $(VENV)/.dashboard-$(KEY)
	@$(BIN)/bufcore demo --out runs/demo --live --dashboard $(PORT)

lint: $(VENV)/.test-$(KEY)
	$(BIN)/ruff check .
	$(BIN)/mypy bufcore app pages

# pytest exits 5 when it collected no test; make treats that as the failure it is. The browser
# tests drive Debian's chromium: installed here when missing and running as root (elsewhere
# they skip, saying how to install it). Two pytest-xdist workers: the suite is mostly
# single-threaded Python and waiting on child processes, so two halve it on a 2-core CI machine
# (TEST_WORKERS=0 runs it in one process).
TEST_WORKERS ?= 2
test: lint
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = 0 ]; then \
	  apt-get update -qq && apt-get install -y -qq chromium; \
	fi
	$(BIN)/pytest -n $(TEST_WORKERS)

# torchrl's wheel may hold a C++ extension built for another torch (0.14.1's does not load with
# torch 2.13); bench/torchrl_ext.py builds torchrl's shipped sources for this one, once. If that
# fails (no compiler), the bench still runs and its prioritized row says torchrl was skipped.
bench: $(VENV)/.bench-$(KEY)
	-$(BIN)/python -m bench.torchrl_ext
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
