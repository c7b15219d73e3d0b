# Two commands set up and run everything on a new machine: `make demo` and `make test`.
# Each installs what it needs into .venv; a stamp keyed on pyproject.toml's content makes
# later runs skip the install.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
KEY := $(shell sha256sum pyproject.toml | cut -c1-16)
TORCH := torch==2.13.0

# make demo PORT=8600 serves the dashboard on another port.
PORT ?= 8501

.PHONY: demo test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# torch first, pinned: an unpinned resolve would fetch a multi-GB CUDA build.
$(VENV)/.torch: | $(BIN)/python
	$(BIN)/pip install --quiet $(TORCH)
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

# The demo training run writes runs/demo in the background (paced to last ~5 minutes) while
# the dashboard shows it in the foreground; stopping the dashboard (Ctrl-C) stops the run. One
# shell, so the trap sees the run's pid; the dashboard starts once the run's log exists.
demo: $(VENV)/.dashboard-$(KEY)
	@$(BIN)/bufcore demo --out runs/demo --live --quiet & pid=$$!; \
	trap 'kill $$pid 2>/dev/null' EXIT INT TERM; \
	for i in $$(seq 120); do \
	  [ -f runs/demo/metrics.jsonl ] || ! kill -0 $$pid 2>/dev/null && break; sleep 0.5; \
	done; \
	kill -0 $$pid 2>/dev/null || wait $$pid || exit 1; \
	$(BIN)/bufcore dashboard runs/demo --port $(PORT)

lint: $(VENV)/.test-$(KEY)
	$(BIN)/ruff check .
	$(BIN)/mypy bufcore app pages

# pytest exits 5 when it collected no test; make treats that as the failure it is. The browser
# tests drive Debian's chromium: installed here when missing and running as root (elsewhere
# they skip, saying how to install it).
test: lint
	@if [ ! -x /usr/bin/chromium ] && [ "$$(id -u)" = 0 ]; then \
	  apt-get update -qq && apt-get install -y -qq chromium; \
	fi
	$(BIN)/pytest

bench: $(VENV)/.bench-$(KEY)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
