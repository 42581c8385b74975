#!/usr/bin/env bash
# Runs once, when the PostgreSQL volume is created: a second database and role for the
# Iceberg JDBC catalog (the first, `airflow`, is POSTGRES_DB). The role's password is
# CUMULUS_CATALOG_PASSWORD, the variable every Cumulus process connects with
# (docker-compose.yml passes it to this service too).
set -euo pipefail
: "${CUMULUS_CATALOG_PASSWORD:?set CUMULUS_CATALOG_PASSWORD for the catalog role}"
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
    -v password="$CUMULUS_CATALOG_PASSWORD" <<'SQL'
CREATE ROLE cumulus LOGIN PASSWORD :'password';
CREATE DATABASE cumulus OWNER cumulus;
SQL
