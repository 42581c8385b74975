#!/usr/bin/env bash
# One-shot init of the docker-compose deployment (service airflow-init); safe to rerun:
# Airflow's metadata database and the catalog pool, then the Cumulus home (its
# cumulus.toml, schema, demo views), all idempotent.
set -euo pipefail
cd /opt/cumulus

echo "init: airflow db migrate"
airflow db migrate

# The tasks that commit to the catalog run in this pool, one at a time
# ([pipeline] pool); Airflow never schedules a task whose pool does not exist.
pool="$(python -c 'from cumulus.config import load_pipeline_config; print(load_pipeline_config().pool)')"
echo "init: airflow pool $pool (1 slot)"
airflow pools set "$pool" 1 "Cumulus: tasks that commit to the catalog, one at a time"

# The home's settings live in its volume, writable (`cumulus source add` writes them);
# the image's docker/cumulus.toml is the first version, never copied over a later one.
mkdir -p "$CUMULUS_HOME"
if [ ! -f "$CUMULUS_HOME/cumulus.toml" ]; then
    echo "init: $CUMULUS_HOME/cumulus.toml from docker/cumulus.toml"
    cp docker/cumulus.toml "$CUMULUS_HOME/cumulus.toml"
fi

echo "init: cumulus home $CUMULUS_HOME (catalog $CUMULUS_CATALOG_URI)"
cumulus init --schema demo/tpch_schema.sql
for view in demo/views/*.sql; do
    name="$(basename "$view" .sql)"
    if cumulus view show "$name" >/dev/null 2>&1; then
        echo "init: view $name: registered"
    else
        cumulus view add "$name" "$view"
    fi
done
cumulus dbt profile

# The SQL endpoint serves every interface, so it authenticates: its user $SQL_USER with
# the password $SQL_PASSWORD (.env; without a user the server refuses to start).
if [ -n "${SQL_PASSWORD:-}" ]; then
    printf '%s\n' "$SQL_PASSWORD" | cumulus sql-server --set-password "${SQL_USER:-cumulus}"
else
    echo "init: SQL_PASSWORD is not set: the SQL endpoint will refuse to start" >&2
fi
echo "init: done"
