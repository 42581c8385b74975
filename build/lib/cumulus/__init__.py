"""Cumulus: SQL aggregate views kept up to date incrementally on Apache Iceberg.

Pipeline: schema DDL and view SQL -> (sql) compiler -> M3 trigger programs (m3) ->
Spark engine applying deltas to Iceberg map tables (engine, store) -> reads (read).
"""

__version__ = "0.1.0"
