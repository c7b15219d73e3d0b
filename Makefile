# Two commands set up and run everything on a new machine: `make demo` and `make test`.
# Each installs what it needs into .venv; a stamp keyed on pyproject.toml's content makes
# later runs skip the install.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
KEY := $(shell sha256sum pyproject.toml | cut -c1-16)
TORCH := torch==2.13.0

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

$(VENV)/.bench-$(KEY): $(VENV)/.core-$(KEY)
	$(BIN)/pip install --quiet -e '.[bench]' $(TORCH)
	rm -f $(VENV)/.bench-*; touch $@

# The demo training run into runs/demo (replacing a previous one), then what it wrote.
demo: $(VENV)/.core-$(KEY)
	$(BIN)/bufcore demo --out runs/demo
	$(BIN)/bufcore inspect runs/demo

lint: $(VENV)/.test-$(KEY)
	$(BIN)/ruff check .
	$(BIN)/mypy bufcore app

# pytest exits 5 when it collected no test; make treats that as the failure it is.
test: lint
	$(BIN)/pytest

bench: $(VENV)/.bench-$(KEY)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
