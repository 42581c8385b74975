#!/usr/bin/env bash
# One-shot init of the docker-compose deployment (service airflow-init); safe to rerun:
# Airflow's metadata database, then the Cumulus home (schema, demo views), all idempotent.
set -euo pipefail
cd /opt/cumulus

echo "init: airflow db migrate"
airflow db migrate

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
echo "init: done"
