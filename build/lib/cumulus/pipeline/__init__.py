"""Glue between Airflow and the engine: what DAG files share (assets, settings, commands).
DAG files stay thin: every step is a Cumulus command or Spark job."""
