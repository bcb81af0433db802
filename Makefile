# bayes_activeeval — every target creates or reuses .venv with a Python >= 3.12 found by
# scripts/find-python.sh (python3.12/3.13 on PATH, then pyenv's versions; override with PYTHON=...).
# The venv holds exactly the versions in requirements/dev.lock (hashes checked); it is rebuilt from
# scratch whenever the lock or pyproject.toml changes. `make lock` refreshes the lock (uv),
# `make test-latest` runs the suite in a throw-away venv with the newest releases.
VENV    := .venv
VPY     := $(VENV)/bin/python
LOCK    := requirements/dev.lock
STAMP   := $(VENV)/.installed
UV_VERSION := 0.13.9
PYTEST_ARGS ?=
# the suite runs on every core (pytest-xdist), at most MAXJOBS workers (each imports PyMC and
# builds its files' models), one test file per worker so that a file's shared compiled models are
# built once; `make test JOBS=0` runs it in one process
JOBS    ?= auto
MAXJOBS ?= 4

.PHONY: demo test test-latest lint format docs clean venv lock lock-upgrade

venv: $(STAMP)

$(STAMP): $(LOCK) pyproject.toml
	@py="$$(sh scripts/find-python.sh)" || exit 1; \
	echo "creating $(VENV) with $$py from $(LOCK)"; rm -rf $(VENV); "$$py" -m venv $(VENV) || exit 1
	$(VPY) -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps -r $(LOCK)
	$(VPY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	$(VPY) -m pip check
	@touch $(STAMP)

# The lock: `make lock` re-resolves it after a change of pyproject.toml, keeping every pin that still
# fits; `make lock-upgrade` moves every pin to the newest release (then run `make test`).
UV_COMPILE = py="$$(sh scripts/find-python.sh)" || exit 1; \
	rm -rf .uv-venv && "$$py" -m venv .uv-venv && .uv-venv/bin/python -m pip install --quiet uv==$(UV_VERSION) && \
	.uv-venv/bin/uv pip compile pyproject.toml --extra dev --generate-hashes --universal \
	  --python-version 3.12 --quiet -o $(LOCK)

lock:
	@$(UV_COMPILE) && rm -rf .uv-venv

lock-upgrade:
	@$(UV_COMPILE) --upgrade && rm -rf .uv-venv

# The suite against the newest releases (a deliberate upgrade check; main stays on the lock).
test-latest:
	@py="$$(sh scripts/find-python.sh)" || exit 1; \
	rm -rf .venv-latest && "$$py" -m venv .venv-latest && \
	.venv-latest/bin/python -m pip install --quiet --upgrade pip && \
	.venv-latest/bin/python -m pip install --quiet --upgrade -e '.[dev]' && \
	.venv-latest/bin/python -m pytest -n $(JOBS) --maxprocesses $(MAXJOBS) --dist loadfile $(PYTEST_ARGS)

demo: $(STAMP)
	$(VENV)/bin/bae demo

test: $(STAMP)
	$(VPY) -m pytest -n $(JOBS) --maxprocesses $(MAXJOBS) --dist loadfile $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check bayes_activeeval tests benchmarks examples
	$(VENV)/bin/ruff format --check bayes_activeeval tests benchmarks examples

format: $(STAMP)
	$(VENV)/bin/ruff check --fix bayes_activeeval tests benchmarks examples
	$(VENV)/bin/ruff format bayes_activeeval tests benchmarks examples

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

clean:
	rm -rf $(VENV) .venv-latest .uv-venv site .pytest_cache build *.egg-info
