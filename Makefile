# Every target sets up what is missing first (scripts/setup.sh: seconds when nothing is).
# Pass extra pytest options with ARGS, e.g. `make test-unit ARGS="-k parser -x"`.
PY := .venv/bin/python
ARGS ?=

.PHONY: setup lock soak-concurrent test test-main test-slow test-corpus test-unit test-spark lint dbt-generate demo sql-server engine soak

setup:
	bash scripts/setup.sh

# Every test (the main suite and the slow and corpus tiers) on two pytest-xdist workers,
# a file's tests on one (the longest files first, in tests/conftest.py's LONGEST_FIRST
# order, then the files with the most tests; each worker one file ahead): what CI runs.
# test-main runs the main suite alone (every marker but slow and corpus), test-corpus the
# engine over the whole view corpus.
# The lock (requirements.txt) from pyproject.toml's dependencies and extras; existing pins
# are kept unless a dependency's range excludes them (`make lock UPGRADE=1` takes the newest).
lock:
	cp requirements.txt requirements.lock.tmp
	uv pip compile pyproject.toml --all-extras --python-version 3.11 --custom-compile-command "make lock" \
		$(if $(UPGRADE),--upgrade) -q -o requirements.lock.tmp
	{ sed -n 1,3p requirements.txt; cat requirements.lock.tmp; } > requirements.txt.new && rm requirements.lock.tmp
	mv requirements.txt.new requirements.txt

test: setup
	$(PY) -m pytest tests -n 2 --dist loadfile --durations=25 $(ARGS)

test-main: setup
	$(PY) -m pytest tests -m "not slow and not corpus" --durations=15 $(ARGS)

test-slow: setup
	$(PY) -m pytest tests -m slow -n 2 --dist loadfile --durations=15 $(ARGS)

test-corpus: setup
	$(PY) -m pytest tests -m corpus $(ARGS)

test-unit: setup
	$(PY) -m pytest tests -m "not spark and not airflow and not e2e" $(ARGS)

test-spark: setup
	$(PY) -m pytest tests -m spark $(ARGS)

# The random kill loop (tests/engine/killloop.py): the pipeline's worker SIGKILLed at
# KILLS random instants (200), resumed each time, every closed epoch verified. CI runs 6
# (tests/engine/test_kill_loop.py). The last line: soak: K kills, E epochs verified, ...
soak: setup
	$(PY) tests/engine/killloop.py --kills $(or $(KILLS),200) $(if $(SEED),--seed $(SEED))

# The concurrent kill loop (tests/engine/test_parallel_applies.py): three sources applying
# at once and the closer on a PostgreSQL catalog, one of them SIGKILLed KILLS times (40,
# over EPOCHS epochs: 8; CI runs 10 over 2). The last lines: `kills: K (...)`, then the
# test's result.
soak-concurrent: setup
	PARALLEL_KILLS=$(or $(KILLS),40) PARALLEL_EPOCHS=$(or $(EPOCHS),8) $(if $(SEED),PARALLEL_SEED=$(SEED)) \
		$(PY) -m pytest -s tests/engine/test_parallel_applies.py

lint: setup
	.venv/bin/ruff check .

# The dbt project's generated staging layer (models/staging) from the demo's views, in
# name order as the demo registers them (docs/dbt.md). CI runs the same command with
# --check (tests/sqlreads/test_dbt_generated.py, main tier) and fails on stale files.
dbt-generate: setup
	.venv/bin/cumulus dbt generate --schema demo/tpch_schema.sql $(sort $(wildcard demo/views/*.sql))

demo: setup
	bash scripts/demo.sh

# The SQL endpoint (Spark Thrift server, docs/sql.md) on $CUMULUS_HOME or ./.cumulus:
# `make sql-server PORT=10001 HOME_DIR=/path/to/home`.
sql-server: setup
	.venv/bin/cumulus $(if $(HOME_DIR),--home $(HOME_DIR)) sql-server $(if $(PORT),--port $(PORT))

# The warm engine (docs/airflow.md, The warm engine) on $CUMULUS_HOME or ./.cumulus:
# `make engine HOME_DIR=/path/to/home CADENCE=2`. Airflow's tasks hand their steps to it.
engine: setup
	.venv/bin/cumulus $(if $(HOME_DIR),--home $(HOME_DIR)) engine serve $(if $(CADENCE),--cadence $(CADENCE))
