"""Airflow assets Cumulus publishes. The epoch DAG's publish task updates
STABLE_SNAPSHOT (extra: {"epoch": N, "tag": "epoch-N", "home": ...}) once an epoch is
closed and validated; the dbt DAG is scheduled on it."""

from __future__ import annotations

from airflow.sdk import Asset

STABLE_SNAPSHOT = Asset(name="cumulus_stable_snapshot", uri="cumulus://stable-snapshot")
