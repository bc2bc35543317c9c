# Two entry points for a new user: `make run` and `make test`. Both build .venv from scratch.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test test-capabilities test-all lint docs bench compat clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/commbench allreduce

# The import contracts (pyproject.toml [tool.importlinter]) and the manual's strict build run
# with the tests, so a back-edge or a broken docs link fails CI like a failing test. Unit tests
# start no ranks and run on both cores; the multi-rank tests run one at a time (two at once on
# two cores make each other's timings and start-up flaky). `make test` (the CI gate; its
# multi-rank part took 180 s in a clean-clone CI on 2026-12-05) runs the tests marked `core`:
# per capability the run that checks the most of it, every harness check (a killed, hung,
# raising or never-started rank) and the docs blocks that start ranks once or twice. `make
# test-capabilities` (CI's second job, .ci/run) runs the tests marked `capability`: the only
# real test of a capability that `core` leaves out for time (history.html in a browser,
# alltoallv's injected faults, the MoE and framework record/replay, --rounds/--repeat, --bind,
# the live terminal table, gloo's capability table, the docs blocks that start ranks many
# times; 197 s in that CI). `make test-all`
# runs every multi-rank test (about 20 minutes here).
CORE := -m "core or gpu or not integration"

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mkdocs build --strict --quiet --site-dir site
	$(BIN)/python -m pytest -q -n 2 tests/unit
	$(BIN)/python -m pytest -q -p no:xdist --ignore=tests/unit $(CORE)

test-capabilities: $(STAMP)
	$(BIN)/python -m pytest -q -p no:xdist --ignore=tests/unit -m "capability and not core"

test-all: test
	$(BIN)/python -m pytest -q -p no:xdist --ignore=tests/unit -m "integration and not core"

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports

# The manual (docs/, mkdocs-material) into site/; `make docs SERVE=1` serves it live.
docs: $(STAMP)
	$(BIN)/mkdocs $(if $(SERVE),serve,build --strict --site-dir site)

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

# Every torch release pyproject.toml admits, each in its own cached venv (downloads ~5 GB per
# release on first use; not part of `make test`). RELEASES=2.4.1,2.13.0 picks some.
compat: $(STAMP)
	$(BIN)/python scripts/compat.py $(if $(RELEASES),--releases $(RELEASES))

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache site
