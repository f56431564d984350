PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup server check test test-unit demo clean-evidence

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

server: $(STAMP)
	$(BIN)/qualify local-server build

check: $(STAMP)
	$(BIN)/ruff format --check qualify tests bench
	$(BIN)/ruff check qualify tests bench
	$(BIN)/mypy qualify

test-unit: $(STAMP)
	$(BIN)/pytest tests/unit -q

test: server
	$(BIN)/pytest -q

demo: server
	$(BIN)/qualify keygen --out .qualify/keys/demo --force
	$(BIN)/qualify run examples/smollm2/candidate.toml --key .qualify/keys/demo.key; \
	  code=$$?; echo "qualify run exited $$code (0 promote, 1 no-promote)"; \
	  test $$code -le 1
