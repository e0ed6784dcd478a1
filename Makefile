PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench lint docs clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.[all,test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m jaxbridge demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -q
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

bench: $(STAMP)
	$(BIN)/python -m jaxbridge bench

docs: $(STAMP)
	$(BIN)/mkdocs serve

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/pyright

clean:
	rm -rf $(VENV) demo-output
