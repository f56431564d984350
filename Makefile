PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup lock server test-deps check test test-unit demo clean-evidence

LOCK := requirements-dev.lock

# The venv is installed from the lock file (exact versions), then qualify itself, editable.
$(STAMP): pyproject.toml $(LOCK)
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r $(LOCK) -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

# Re-pin after changing the dependencies in pyproject.toml: a fresh venv, newest allowed versions.
lock:
	rm -rf .lock-venv
	$(PY) -m venv .lock-venv
	.lock-venv/bin/pip install -q -e '.[dev]'
	{ sed -n '/^#/p' $(LOCK); .lock-venv/bin/pip freeze --exclude-editable; } > $(LOCK).new
	mv $(LOCK).new $(LOCK)
	rm -rf .lock-venv

server: $(STAMP)
	$(BIN)/qualify local-server build

# cmake, g++, Prometheus and its Pushgateway (Debian's packages) when missing: scripts/test-deps.sh
# says which.
test-deps:
	bash scripts/test-deps.sh

check: $(STAMP)
	$(BIN)/ruff format --check qualify tests bench
	$(BIN)/ruff check qualify tests bench
	$(BIN)/mypy qualify
	$(BIN)/python scripts/size_check.py

# Unit tests run on two workers (they share nothing), with the integration tests that start no
# llama-server (published evidence, recorded engines, Prometheus, the Pushgateway); the ones
# that do run one at a time, since two busy llama-servers on two cores slow each other tenfold.
test-unit: $(STAMP)
	$(BIN)/pytest tests/unit -q -n 2

SERVERLESS := $(shell grep -l 'mark.serverless' tests/integration/test_*.py)

test: test-deps server
	$(BIN)/pytest tests/unit $(SERVERLESS) -q -n 2 --durations=10
	$(BIN)/pytest tests/integration -q -m "not serverless" --durations=25

# The trust set-up first: a scratch house repository with the demo house policy, and the demo
# key pinned to sign decisions (a fresh key each time, so a fresh house).
demo: server
	$(BIN)/qualify keygen --out .qualify/keys/demo --force
	rm -rf .qualify/house
	$(BIN)/qualify house init .qualify/house --policy examples/house/house-policy.toml
	$(BIN)/qualify house pin decision .qualify/keys/demo.pub --name demo \
	  --why "the demo signs its own runs" --house .qualify/house
	$(BIN)/qualify run examples/smollm2/candidate.toml --key .qualify/keys/demo.key \
	  --house .qualify/house; \
	  code=$$?; echo "qualify run exited $$code (0 promote, 1 no-promote)"; \
	  test $$code -le 1
