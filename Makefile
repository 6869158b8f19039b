# Skiff: `make demo` and `make test` work on a fresh clone (Python 3.11 + pip is all they need).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv demo test test-fast bench lint clean

venv: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements-dev.txt
	$(BIN)/pip install -q --no-deps -e .
	touch $(STAMP)

demo: venv
	$(BIN)/python -m devstack demo

test: venv
	$(BIN)/python -m pytest -q -p no:cacheprovider

bench: venv
	$(BIN)/python -m benchmarks

lint: venv
	$(BIN)/ruff check .

clean:
	rm -rf .airflow .demo .pytest_cache
