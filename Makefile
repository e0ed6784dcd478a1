PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench

.PHONY: demo test bench lint docs clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.[all,test]'
	touch $(STAMP)

# The peers the benchmarks compare against (mujoco-mjx, sympy2jax, equinox): `make bench` only.
$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(BIN)/pip install -q -e '.[all,test,bench]'
	touch $(BENCH_STAMP)

demo: $(STAMP)
	$(BIN)/python -m jaxbridge demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/pyright src
	# Two workers, one per core. A hung test ends its worker after 300 s (pytest-timeout, in
	# pyproject.toml); a worker that dies ends the run instead of being replaced (a CI run once
	# made no progress for an hour after one died); `timeout` bounds the whole run.
	timeout -k 60 1800 $(BIN)/python -m pytest -q -n 2 --dist loadfile --max-worker-restart=0
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

bench: $(BENCH_STAMP)
	$(BIN)/python -m jaxbridge bench

docs: $(STAMP)
	$(BIN)/mkdocs serve

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/pyright

clean:
	rm -rf $(VENV) demo-output
