# Every target installs what it needs first (idempotent): a virtualenv with pinned packages,
# the Delta jars (from the jsoniq wheel) and this project in editable mode.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# What the product and the demo run on (requirements.lock: `make demo` installs only that),
# then the tests', linters' and notebooks' tools on top (requirements-dev.lock: `make venv`).
RUNTIME := $(VENV)/.runtime
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
BENCH_ARGS ?=

.PHONY: venv runtime docs-assets demo test tests test-deep lint unit bench soak clean chromium notebooks-docs

# The locks pin every package with its dependencies (tests/unit/test_locks.py checks it), so pip
# installs them --no-deps, resolving nothing again, in one run with the Delta jars' wheel and
# this project. --no-compile: pip would compile all 6,500 modules of these packages (15 s of
# one core); Python compiles those a process imports when it first imports them.
$(RUNTIME): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-deps --no-compile -r requirements.lock \
		jsoniq==3.0.2 -e .
	# The demo and the local test servers (lakehouse_demo, lakehouse_local) are not in the
	# product's wheel: the checkout's root on the virtualenv's path makes them importable.
	$(BIN)/python -c "import pathlib, sysconfig; pathlib.Path(sysconfig.get_paths()['purelib'], \
		'cdc_lakehouse_checkout.pth').write_text('$(CURDIR)\n')"
	$(BIN)/python -c "from lakehouse_core.spark import local_delta_jars; local_delta_jars()"
	touch $(RUNTIME)

# The test suite starts hundreds of Python processes: there every module is compiled once, here
# (a file compileall cannot compile is left to fail where it is imported, as pip leaves it).
$(STAMP): $(RUNTIME) requirements-dev.lock
	$(BIN)/python -m pip install --quiet --no-deps -r requirements-dev.lock
	$(BIN)/python -c "import compileall, sysconfig; \
		compileall.compile_dir(sysconfig.get_paths()['purelib'], quiet=2, workers=0)"
	touch $(STAMP)

# The browser assets of the Data Docs (npm packages pinned with their lock file's integrity
# hashes), so `lakehouse validate --docs` writes pages that load nothing from the web; npm from
# Debian where it is missing. Only the targets that write Data Docs (demo, tests) pull them:
# `make unit` and `make lint` need the virtualenv alone.
DOCS_ASSETS := $(VENV)/share/lakehouse/data-docs-assets
$(DOCS_ASSETS)/.installed: expectations/docs_assets/package.json expectations/docs_assets/package-lock.json
	command -v npm >/dev/null || (apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends nodejs npm) || \
		echo "note: npm could not be installed here; lakehouse validate --docs will say so"
	if command -v npm >/dev/null; then \
		mkdir -p $(DOCS_ASSETS) && \
		cp expectations/docs_assets/package.json expectations/docs_assets/package-lock.json \
			$(DOCS_ASSETS)/ && \
		cd $(DOCS_ASSETS) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error && \
		touch .installed; \
	fi

venv: $(STAMP)

runtime: $(RUNTIME)

docs-assets: $(DOCS_ASSETS)/.installed

# The packages and the Data Docs' assets install side by side (pip and npm).
demo:
	$(MAKE) --no-print-directory -j2 runtime docs-assets
	$(BIN)/python -m lakehouse_demo demo

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# Lint and the tests at once (mypy from scratch takes a minute of one core, while the test
# workers start their JVMs). Two test workers (pytest-xdist), each with its own Spark session
# (a worker keeps a core busy: with three, the processors were 3 % idle and the suite took
# longer); a module stays on one worker, so its module-scoped fixtures (a demo run, a shared
# warehouse) are built once. Modules go to the workers heaviest first (tests/conftest.py), not in
# xdist's default order (most tests first, which left the one-test modules to the end).
test: venv
	$(MAKE) --no-print-directory -j2 lint tests

tests: venv docs-assets chromium
	$(BIN)/python -m tests.class_archive
	$(BIN)/pytest -n 2 --dist loadscope --no-loadscope-reorder --all-tiers $(PYTEST_ARGS)

# Not in CI: the property tests with ten times the examples, each run from a new seed
# (a failure prints the seed that reproduces it).
test-deep: venv
	$(BIN)/python -m tests.class_archive
	LAKEHOUSE_TEST_DEPTH=10 $(BIN)/pytest tests/integration -k property $(PYTEST_ARGS)

# The tests that start no JVM (about a minute): what plain `pytest` runs (tests/conftest.py).
unit: venv
	$(BIN)/pytest -m "unit and not spark" $(PYTEST_ARGS)

# First the Spark jobs and Delta commits of a steady run of the demo's whole pipeline (exact
# counts, per query and table); one silver batch against tables of 100k, 1M and 10M rows,
# without and with deletion vectors; last, a fresh read of a 1M-row table against a plain one.
bench: venv
	$(BIN)/python -m benchmarks.batch_jobs $(BATCH_JOBS_ARGS)
	$(BIN)/python -m benchmarks.bench $(BENCH_ARGS)
	$(BIN)/python -m benchmarks.gold_bench $(GOLD_BENCH_ARGS)
	$(BIN)/python -m benchmarks.nexmark_bench $(NEXMARK_BENCH_ARGS)
	$(BIN)/python -m benchmarks.pattern_latency $(PATTERN_BENCH_ARGS)
	$(BIN)/python -m benchmarks.status_bench $(STATUS_BENCH_ARGS)
	$(BIN)/python -m benchmarks.batch_cost --sizes 100000,1000000,10000000 --batches 2 \
		--warmup 1 --json benchmarks/results/latest-batch-cost.json
	$(BIN)/python -m benchmarks.fresh_cost --rows 1000000 --pending 10000 --json

# A continuous run at a steady rate for SOAK_MINUTES (default 30; not in make test): memory,
# files per table, checkpoint size and per-batch time with their slopes per hour, then nothing
# lost or duplicated (benchmarks/results/latest-soak.json).
soak: venv
	SOAK_MINUTES=$${SOAK_MINUTES:-30} $(BIN)/python -m benchmarks.soak $(SOAK_ARGS)

# Headless Chromium (Debian package) for the test that opens the GX Data Docs; installed with
# apt-get where missing; where apt-get is unavailable it says so and that test is skipped.
chromium: venv
	$(BIN)/python -m tests.browser

# Execute every notebook (the same run as their test) and render the executed copies with
# their plots to docs/notebooks/*.html, for readers who run nothing.
notebooks-docs: venv
	$(BIN)/python -m tests.notebooks docs/notebooks

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
