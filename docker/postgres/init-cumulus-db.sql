-- Runs once, when the PostgreSQL volume is created: a second database and role for the
-- Iceberg JDBC catalog (the first, `airflow`, is POSTGRES_DB).
CREATE ROLE cumulus LOGIN PASSWORD 'cumulus';
CREATE DATABASE cumulus OWNER cumulus;
