#!/usr/bin/env bash
# The demo (README's first command, via `make demo`). Until the Airflow pipeline lands it
# shows what exists end to end: SQL views compiled to M3 with shared maps, then replayed
# by the reference interpreter over the DBToaster TPC-H stream (inserts and deletes).
set -euo pipefail
cd "$(dirname "$0")/.."
CUMULUS=.venv/bin/cumulus
SHARED=../shared
SCHEMA=$SHARED/examples/tpch_schema.sql
STREAM=$SHARED/data/dbtoaster/tpch/standard_del
VIEWS=tests/fixtures/views/tpch

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "1/4 The paper's Example 2.1, hand-written M3, checked against its schema"
$CUMULUS m3 check $SHARED/examples/example21.m3 --schema $SHARED/examples/paper_schema.sql

step "2/4 The same query in SQL, compiled to M3 (first lines)"
$CUMULUS compile $SHARED/examples/example21.sql --schema $SHARED/examples/paper_schema.sql | head -40

step "3/4 Three TPC-H views compiled together: maps shared between views"
$CUMULUS compile $VIEWS/order_priority_mix.sql $VIEWS/orders_by_year.sql $VIEWS/customer_order_extremes.sql \
  --schema "$SCHEMA" --check | grep -A 40 '^-- maps:'

step "4/4 Replaying $(wc -l < $STREAM/lineitem.csv) lineitem events (and the other relations) through the interpreter"
for view in q01_pricing_summary revenue_by_nation_part order_priority_mix; do
  echo "-- view $view"
  $CUMULUS interpret --schema "$SCHEMA" --view $VIEWS/$view.sql --events "$STREAM" --format dbtoaster --output table | head -12
done
echo
echo "Done. Next: 'make test' runs every test tier; docs/ describes the stack."
