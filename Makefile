# bayes_activeeval — every target creates or reuses .venv with a Python >= 3.12 found by
# scripts/find-python.sh (python3.12/3.13 on PATH, then pyenv's versions; override with PYTHON=...).
VENV    := .venv
VPY     := $(VENV)/bin/python
STAMP   := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: demo test lint format docs clean venv

venv: $(STAMP)

$(STAMP): pyproject.toml
	@py="$$(sh scripts/find-python.sh)" || exit 1; \
	if [ ! -x $(VPY) ] || ! $(VPY) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' 2>/dev/null; then \
	  echo "creating $(VENV) with $$py"; rm -rf $(VENV); "$$py" -m venv $(VENV) || exit 1; \
	fi
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/bae demo

test: $(STAMP)
	$(VPY) -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check bayes_activeeval tests benchmarks examples
	$(VENV)/bin/ruff format --check bayes_activeeval tests benchmarks examples

format: $(STAMP)
	$(VENV)/bin/ruff check --fix bayes_activeeval tests benchmarks examples
	$(VENV)/bin/ruff format bayes_activeeval tests benchmarks examples

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

clean:
	rm -rf $(VENV) site .pytest_cache build *.egg-info
