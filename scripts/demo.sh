#!/usr/bin/env bash
# The demo (README's first command, via `make demo`): a TPC-H event stream from
# tpchgen-cli (two sources, inserts and deletes) runs epoch by epoch through the real
# cumulus_epoch Airflow DAG (`airflow dags test`: ingest, apply, close, validate,
# publish; its Spark steps handed to the home's warm engine), then the dbt DAG. Each run
# draws a progress bar of its tasks (scripts/demo_dag.py); an epoch's views print at its
# tag as soon as its close ends, then the ledger, the validation outcome and the report.
#
#   DEMO_DIR=.cumulus/demo  DEMO_SCALE=0.01  DEMO_EPOCHS=3  DEMO_FRACTION=0.01  bash scripts/demo.sh
#
# Everything lives under DEMO_DIR (replaced on every run): stream/, home/ (the Cumulus
# home), airflow/ (AIRFLOW_HOME, SQLite metadata), logs/ (one Airflow log per run).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
VENV_BIN="$ROOT/.venv/bin"
DEMO="$(realpath -m "${DEMO_DIR:-.cumulus/demo}")"
SCALE="${DEMO_SCALE:-0.01}"
EPOCHS="${DEMO_EPOCHS:-3}"
FRACTION="${DEMO_FRACTION:-0.01}"
START="2024-01-01T00:00:00+00:00"
VIEWS=(revenue_by_nation_brand order_priority_mix pricing_summary)

export PATH="$VENV_BIN:$PATH"
export CUMULUS_HOME="$DEMO/home"
export AIRFLOW_HOME="$DEMO/airflow"
export AIRFLOW__CORE__DAGS_FOLDER="$ROOT/dags"
export AIRFLOW__CORE__PLUGINS_FOLDER="$ROOT/plugins"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"

T0=$(date +%s)
step() { printf '\n\033[1m== [%3ds] %s\033[0m\n' "$(( $(date +%s) - T0 ))" "$*"; }
say() { printf '   %s\n' "$*"; }

step "1/6 TPC-H event stream: scale $SCALE, $EPOCHS epochs, ${FRACTION} of lineitem changed per epoch"
rm -rf "$DEMO"
mkdir -p "$DEMO/logs"
cumulus generate tpch --scale "$SCALE" --epochs "$EPOCHS" --fraction "$FRACTION" --out "$DEMO/stream" | sed 's/^/   /'

step "2/6 Cumulus home: schema, the two sources, the views ${VIEWS[*]} (one Spark session)"
# Airflow's metadata database is set up meanwhile (in Python, beside the home's JVM).
airflow_db() {
    if airflow db migrate && airflow pools set cumulus_catalog 1 "Cumulus catalog writers (one commit at a time)"; then
        touch "$DEMO/logs/airflow-db.done"
    else
        touch "$DEMO/logs/airflow-db.failed"
    fi
}
airflow_db >"$DEMO/logs/airflow-db.log" 2>&1 &
view_args=()
for v in "${VIEWS[@]}"; do view_args+=(--view "$v=demo/views/$v.sql"); done
python scripts/demo_home.py --home "$CUMULUS_HOME" --schema demo/tpch_schema.sql --stream "$DEMO/stream" \
    "${view_args[@]}" --spark-master "local[2]" \
    --pipeline "start=$START" --pipeline epoch_interval=1d --pipeline late_timeout=5m \
    --pipeline poke_interval=10s --pipeline retry_delay=10s 2>"$DEMO/logs/home.log" | sed 's/^/   /'

step "3/6 Airflow (SQLite metadata in $AIRFLOW_HOME) and the warm engine"
# The warm engine: one Spark session that runs every Spark step the DAG's tasks hand it.
# --cadence 0: it does not pick up landed files on its own, so each run shows its ingest.
cumulus engine serve --cadence 0 >"$DEMO/logs/engine.log" 2>&1 &
ENGINE_PID=$!
# Marks the engine's exit, so that the runs below do not wait for an engine that is gone.
(while kill -0 "$ENGINE_PID" 2>/dev/null; do sleep 0.5; done; touch "$DEMO/logs/engine.exited") &
WATCH_PID=$!
trap 'kill "$WATCH_PID" 2>/dev/null; cumulus engine stop --wait 60 >/dev/null 2>&1 || kill "$ENGINE_PID" 2>/dev/null || true' EXIT
say "engine log: $DEMO/logs/engine.log; Airflow's database: $DEMO/logs/airflow-db.log"
# cumulus_epoch's tasks (the progress bar's length): epoch, sources, close, validate,
# publish, and a wait, an ingest and an apply per source.
TASKS=$(( 5 + 3 * $(cumulus source list --format csv | tail -n +2 | wc -l) ))

# Steps 4 and 5: every epoch through cumulus_epoch, then cumulus_dbt, in one Airflow
# process started now (its imports and execution API while the engine's JVM starts); the
# runs begin once Airflow's database and the engine are up. A progress bar per run; an
# epoch's views print at tag epoch-N as soon as its close task ends, while validation
# runs; then the ledger and the validation report.
python scripts/demo_dag.py --logs "$DEMO/logs" --start "$START" --epochs "$EPOCHS" --tasks "$TASKS" \
    --views "${VIEWS[@]}" --clock "$T0" --wait "$DEMO/logs/airflow-db.done" --wait "$CUMULUS_HOME/engine/engine.json" \
    --abort-if "$DEMO/logs/airflow-db.failed" --abort-if "$DEMO/logs/engine.exited" || {
    echo "   logs: $DEMO/logs/ (engine.log, airflow-db.log, one per DAG run)" >&2
    exit 1
}

step "6/6 Done in $(( $(date +%s) - T0 )) s. Everything is in $DEMO"
cat <<EOF
   The Airflow UI (api-server, scheduler, dag-processor, triggerer in one process):
     export AIRFLOW_HOME=$AIRFLOW_HOME CUMULUS_HOME=$CUMULUS_HOME
     export AIRFLOW__CORE__DAGS_FOLDER=$ROOT/dags AIRFLOW__CORE__PLUGINS_FOLDER=$ROOT/plugins
     export AIRFLOW__CORE__LOAD_EXAMPLES=False PATH=$VENV_BIN:\$PATH
     airflow standalone
   then open http://localhost:8080 (user admin, password in
   $AIRFLOW_HOME/simple_auth_manager_passwords.json.generated); the ledger is under
   "Cumulus" in the navigation (or http://localhost:8080/cumulus/).

   SQL over the stable snapshots (Spark Thrift JDBC server):
     cumulus --home $CUMULUS_HOME sql-server        # then: beeline -u jdbc:hive2://localhost:10000
   Reads without a JVM:  cumulus --home $CUMULUS_HOME read revenue_by_nation_brand --stable

   Fresh values within seconds: run the warm engine with a cadence (the demo's engine has
   stopped), drop files into a source's folder of the open epoch, read main:
     cumulus --home $CUMULUS_HOME engine serve --cadence 2 &
     cumulus --home $CUMULUS_HOME epoch status            # the open epoch N; sources' folders:
     cumulus --home $CUMULUS_HOME source list             # <landing>/epoch-N/
     cumulus --home $CUMULUS_HOME read revenue_by_nation_brand      # main: fresh, not yet closed
EOF
