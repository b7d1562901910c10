# Quickstart: `make demo` and `make test` on a machine with only Python 3.11+.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
DEMO   := demo-output

.PHONY: demo test lint format bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed

## demo: simulate subjects with known observers over the BayesBench design and score them
demo: $(VENV)/.installed
	$(BIN)/bayesobs simulate --subjects 3 --trials 40 --out $(DEMO)/trials.csv
	$(BIN)/bayesobs score $(DEMO)/trials.csv --bootstrap 30 --out $(DEMO)/scores
	@echo "demo outputs: $(DEMO)/scores/ (bayesbench.csv, bcs.csv, cue.csv, accuracy.csv, fits.csv, evidence.csv)"

## test: the whole test suite (what CI runs)
test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -n 2 -q

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check bayesobs tests benchmarks
	$(BIN)/ruff format --check bayesobs tests benchmarks

format: $(VENV)/.installed-dev
	$(BIN)/ruff check --fix bayesobs tests benchmarks
	$(BIN)/ruff format bayesobs tests benchmarks

## bench: speed benchmarks (figures go in the closing notes, not in timed tests)
bench: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/bench_fit.py
	$(BIN)/python benchmarks/bench_score.py

clean:
	rm -rf $(VENV) $(DEMO) bench-output .pytest_cache .ruff_cache *.egg-info
