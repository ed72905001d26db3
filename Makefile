# Two entry points, both usable on a fresh machine:
#   make run   -- create .venv, install privfed, run the main job on bundled data
#   make test  -- create .venv, install privfed with dev tools, lint, type-check, build
#                 the docs (warnings as errors), test
#                 (every test, slow ones included: what CI runs)
# and the quick loop while you work: make unit -- every test not marked slow.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.privfed-installed
# pytest workers.  CI machines have 2 cores; a third worker keeps them busy while
# the Flower deployment and soak tests wait on SuperNodes' polls (a few minutes of
# mostly idle time).  worksteal: an idle worker takes tests queued on another.
WORKERS ?= 3
XDIST := -n $(WORKERS) --dist worksteal

.PHONY: setup bytecode run test lint typecheck docs unit alltests bench figures clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

# Byte-compile the editable sources: with PYTHONDONTWRITEBYTECODE set (as on these
# machines) Python would otherwise recompile every privfed module on every start,
# about 0.3 s of the core imports alone.  Up-to-date files are skipped.
bytecode: $(STAMP)
	$(PY) -m compileall -q src >/dev/null

run: bytecode
	$(VENV)/bin/privfed run --overwrite

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks examples docs

typecheck: $(STAMP)
	$(VENV)/bin/mypy

# The documentation site (docs/), warnings as errors; offline.  Open
# docs/_build/html/index.html.
docs: $(STAMP)
	$(VENV)/bin/sphinx-build -W --keep-going -q -b html docs docs/_build/html

# Everything not marked slow: the quick loop while you work.
unit: bytecode
	$(VENV)/bin/pytest $(XDIST) -m "not slow"

# The whole suite, slow tests included (what CI runs); the 30 slowest tests are listed at
# the end, so that a run that creeps towards the 15-minute budget says where.
alltests: bytecode
	$(VENV)/bin/pytest $(XDIST) --durations=30

test: lint typecheck docs alltests

# Regenerate README.md's figures table from benchmarks/results/*.json.
figures: $(STAMP)
	$(PY) benchmarks/figures.py

clean:
	rm -rf $(VENV) build dist docs/_build .pytest_cache .mypy_cache .ruff_cache .hypothesis
