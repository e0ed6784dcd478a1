PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench

.PHONY: demo test test-jax092 bench lint docs clean

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

# The second CI job: jax 0.9.2, the newest jax brax 0.14.2's trainers run on (they call
# jax.device_put_replicated, removed in jax 0.10: brax#671). Its own venv; `make test` is apart.
VENV092 := .venv-jax092
STAMP092 := $(VENV092)/.installed

$(STAMP092): pyproject.toml
	$(PY) -m venv $(VENV092)
	$(VENV092)/bin/pip install -q --upgrade pip
	$(VENV092)/bin/pip install -q -e '.[playground,examples,test]' 'jax==0.9.2' 'jaxlib==0.9.2'
	touch $(STAMP092)

test-jax092: $(STAMP092)
	$(VENV092)/bin/python -c 'import jax, brax; assert jax.__version__ == "0.9.2", jax.__version__'
	timeout -k 60 1800 $(VENV092)/bin/python -m pytest -q -n 2 --dist loadfile \
		--max-worker-restart=0 -rs tests/playground tests/mujoco/test_mjx.py \
		tests/mujoco/test_mjx_dropin.py

bench: $(BENCH_STAMP)
	$(BIN)/python -m jaxbridge bench

docs: $(STAMP)
	$(BIN)/mkdocs serve

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/pyright

clean:
	rm -rf $(VENV) $(VENV092) demo-output
