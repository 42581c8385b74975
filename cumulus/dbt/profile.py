"""The dbt profile of a Cumulus home: dbt-spark's `session` method, whose Spark settings
(`server_side_parameters`) are the session factory's (cumulus.spark.session.spark_conf),
so dbt sees the same Iceberg catalog, jars and warehouse as the engine.

dbt-spark builds its session with `SparkSession.builder.enableHiveSupport()`, applies the
`server_side_parameters` one by one and calls `getOrCreate()` (dbt/adapters/spark/session.py);
PySpark passes them to the JVM it launches, so the driver's class path and options take
effect. Two settings are added (see profile()): no Hive metastore, and a quieter Spark log. The profile is written to
`<home>/dbt/profiles.yml` (it holds absolute paths and possibly the catalog password, so
it lives with the home, not in the repository), next to dbt's target/ and logs/."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from cumulus.config import Settings, checkout_root
from cumulus.errors import ConfigError
from cumulus.spark.session import spark_conf

PROFILE = "cumulus"
TARGET = "session"
SCHEMA = "analytics"  # models without a +schema; staging/ and marts/ name their own
PROJECT_ENV = "CUMULUS_DBT_PROJECT_DIR"


def project_dir() -> Path:
    """The dbt project: $CUMULUS_DBT_PROJECT_DIR, else the checkout's root (dbt_project.yml,
    models/staging and models/marts, macros/, tests/dbt/). An installed wheel has no
    project of its own: point the variable at yours."""
    found = os.environ.get(PROJECT_ENV) or checkout_root()
    if found is None:
        raise ConfigError(f"no dbt project: set ${PROJECT_ENV} to the folder of your dbt_project.yml")
    return Path(found)


def dbt_dir(settings: Settings) -> Path:
    return settings.home / "dbt"


def profiles_path(settings: Settings) -> Path:
    return dbt_dir(settings) / "profiles.yml"


# Spark's log configuration for dbt's driver: warnings only, minus the one dbt-spark causes
# on every statement (it asks the builder for the session again: "Using an existing Spark
# session; only runtime SQL configurations will take effect").
LOG4J2 = """\
# Written by `cumulus dbt profile`: Spark's logging in dbt processes (cumulus/dbt/profile.py).
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.session.name = org.apache.spark.sql.SparkSession
logger.session.level = error
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = error
"""


def log_config_path(settings: Settings) -> Path:
    return dbt_dir(settings) / "log4j2.properties"


def profile(settings: Settings) -> dict:
    """profiles.yml as a dict: one target, a dbt-spark session on the Cumulus catalog."""
    conf = spark_conf(settings, app_name="cumulus-dbt")
    # dbt-spark calls enableHiveSupport() before applying these: without this the first
    # query waits for a Derby Hive metastore (tens of seconds) that nothing here uses; every
    # table dbt reads or writes is in the Iceberg catalog.
    conf["spark.sql.catalogImplementation"] = "in-memory"
    options = conf.get("spark.driver.extraJavaOptions", "")
    conf["spark.driver.extraJavaOptions"] = f"{options} -Dlog4j2.configurationFile={log_config_path(settings)}".strip()
    return {
        PROFILE: {
            "target": TARGET,
            "outputs": {
                TARGET: {
                    "type": "spark",
                    "method": "session",
                    "host": "localhost",  # unused by the session method, required by the schema
                    "schema": SCHEMA,
                    "threads": 1,  # one SparkSession; Spark parallelizes inside a model
                    "server_side_parameters": dict(sorted(conf.items())),
                }
            },
        }
    }


def profile_text(settings: Settings) -> str:
    import yaml

    head = (
        f"# Written by `cumulus dbt profile` for the home {settings.home}: regenerated from its\n"
        "# settings (cumulus.toml, CUMULUS_* variables) by every `cumulus dbt ...`; edit those instead.\n"
    )
    return head + yaml.safe_dump(profile(settings), sort_keys=False, default_flow_style=False)


def write_profile(settings: Settings) -> Path:
    """Write `<home>/dbt/profiles.yml` when its content changed (DAG files call this at
    parse time, so an unchanged profile is not touched); returns its path."""
    path = profiles_path(settings)
    _write_if_changed(log_config_path(settings), LOG4J2)
    _write_if_changed(path, profile_text(settings), mode=0o600)  # may hold the catalog password
    return path


def _write_if_changed(path: Path, text: str, mode: int = 0o644) -> None:
    if path.is_file() and path.read_text() == text:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.chmod(mode)
    tmp.replace(path)  # atomic: a DAG parse and a task never see half a file


def dbt_env(settings: Settings) -> dict[str, str]:
    """Environment for a dbt process on this home: where the profile, target/ and logs/
    are, and what the session factory would set for a local Spark driver."""
    env = {
        "CUMULUS_HOME": str(settings.home),
        "CUMULUS_CATALOG": settings.catalog,  # the sources name the catalog (models/staging)
        "DBT_PROFILES_DIR": str(dbt_dir(settings)),
        "DBT_PROJECT_DIR": str(project_dir()),
        "DBT_TARGET_PATH": str(dbt_dir(settings) / "target"),
        "DBT_LOG_PATH": str(dbt_dir(settings) / "logs"),
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
    }
    if settings.is_local:
        env["SPARK_LOCAL_IP"] = os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")
    return env


def dbt_executable() -> str:
    """The dbt next to the running Python (the venv's), else dbt on PATH."""
    import shutil

    beside = Path(sys.executable).with_name("dbt")
    return str(beside) if beside.is_file() else (shutil.which("dbt") or "dbt")
