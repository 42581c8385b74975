"""The SparkSession factory: the only place a SparkSession is built. It wires the Iceberg
catalog (JDBC, SQLite in the Cumulus home by default) as the default catalog.

The configuration and the reasons for it are in docs/STACK.md.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from cumulus.config import Settings
from cumulus.errors import ConfigError
from cumulus.spark.jars import class_archive, spark_jars

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


# Set (to a path) while scripts/class_archive.py runs: the JVM writes its archive there.
DUMP_ARCHIVE = "CUMULUS_CLASS_ARCHIVE_DUMP"
# More options for the driver JVM, appended to Cumulus' own, and a cluster's executors':
# e.g. the quick JIT that the test suite uses (docs/STACK.md, "A cold JVM").
JVM_OPTIONS = "CUMULUS_JVM_OPTIONS"
# C1 (the quick JIT) only, with room for its code: for JVMs that run many tiny, short
# jobs, where C2's compilations cost more CPU than they save (the test suite's drivers,
# the class-data archive's workload). C1's code cache must be larger than its default
# 48 MB, which filled within 30 s of the kill loop's worker.
QUICK_JIT = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m"
CODEGEN_CACHE = 1000  # compiled classes a session keeps (Spark's default: 100)


def driver_class_path(settings: Settings) -> list[Path]:
    """The jars on the driver JVM's own class path: all of them with a local master, whose
    executor runs in the driver's JVM; none on a cluster, whose executors fetch them from
    spark.jars. (On spark.jars, a local SparkContext copies every jar, 43 MB, into its
    temporary directory at each start, and a killed process leaves the copy in /tmp; its
    classes load through a child class loader, outside the class-data archive.)"""
    return spark_jars(settings.catalog_uri) if settings.is_local else []


def jar_conf(settings: Settings) -> dict[str, str]:
    """Where a session of `settings` gets its jars: the driver's class path (local masters)
    or spark.jars (clusters)."""
    if settings.is_local:
        return {"spark.driver.extraClassPath": os.pathsep.join(map(str, driver_class_path(settings)))}
    return {"spark.jars": ",".join(map(str, spark_jars(settings.catalog_uri)))}


def driver_java_options(settings: Settings) -> str:
    """The driver JVM's options: Derby's home inside the Cumulus home, and the class-data
    archive of its class path that makes a cold start cheap (docs/STACK.md, "A cold JVM")
    when scripts/setup.sh has built it (the JVM's own log is off but for errors, on
    stderr); then $CUMULUS_JVM_OPTIONS."""
    options = [f"-Dderby.system.home={settings.home / 'derby'}"]
    if dump := os.environ.get(DUMP_ARCHIVE):
        options += [f"-XX:ArchiveClassesAtExit={dump}", "-Xlog:disable", "-Xlog:all=error:stderr"]
    elif (archive := class_archive(driver_class_path(settings))) is not None and archive.is_file():
        options += ["-Xshare:auto", f"-XX:SharedArchiveFile={archive}", "-Xlog:disable", "-Xlog:all=error:stderr"]
    options += os.environ.get(JVM_OPTIONS, "").split()
    return " ".join(options)


def spark_conf(settings: Settings, app_name: str = "cumulus") -> dict[str, str]:
    """Every Spark setting of a Cumulus session (pure: no JVM, so it can be unit-tested)."""
    cat = f"spark.sql.catalog.{settings.catalog}"
    home = settings.home
    conf = {
        "spark.master": settings.spark_master,
        "spark.app.name": app_name,
        **jar_conf(settings),
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        cat: "org.apache.iceberg.spark.SparkCatalog",
        f"{cat}.type": "jdbc",
        f"{cat}.uri": settings.catalog_uri,
        f"{cat}.jdbc.schema-version": "V1",
        # Iceberg's JdbcCatalog.initialize leaks a ResultSet on a pooled connection; on
        # SQLite (WAL) that pins a read snapshot for the session's life, so it never sees
        # other processes' commits and its own later commits fail (SQLITE_BUSY_SNAPSHOT).
        # The catalog tables are created by a throwaway catalog instead (ensure_catalog_tables).
        f"{cat}.jdbc.init-catalog-tables": "false",
        # Other processes commit to the same catalog: load table metadata on every query
        # instead of serving a cached (stale) version.
        f"{cat}.cache-enabled": "false",
        f"{cat}.warehouse": str(settings.warehouse),
        "spark.sql.defaultCatalog": settings.catalog,
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "true" if settings.spark_ui else "false",
        "spark.ui.showConsoleProgress": "false",
        # Keep Hive/Derby and the built-in catalog's files inside the home, not the cwd.
        "spark.sql.warehouse.dir": str(home / "spark-warehouse"),
        "spark.driver.extraJavaOptions": driver_java_options(settings),
        # Python workers must run the interpreter that has pyspark and cumulus installed.
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        # Spark keeps 100 compiled query classes; one micro-batch (ingest and apply of two
        # relations, 27 maps) needs more, so a warm engine recompiled about 80 classes per
        # batch (0.5 s or more). docs/STACK.md, "Compiled code".
        "spark.sql.codegen.cache.maxEntries": str(CODEGEN_CACHE),
        # Catalyst infers filters from every predicate and alias of a plan (constraint
        # propagation); over an apply's plans (CASE expressions over dozens of chains, a
        # join per map factor) that cost about 1 s of the driver per micro-batch. Inferred
        # filters only prune rows early; results are the same. docs/STACK.md.
        "spark.sql.constraintPropagation.enabled": "false",
    }
    if settings.catalog_user:
        conf[f"{cat}.jdbc.user"] = settings.catalog_user
    if settings.catalog_password:
        conf[f"{cat}.jdbc.password"] = settings.catalog_password
    if not settings.is_local and (executor := os.environ.get(JVM_OPTIONS, "").split()):
        # A cluster's executors are JVMs of their own: $CUMULUS_JVM_OPTIONS (the tests'
        # quick JIT) is theirs too.
        conf["spark.executor.extraJavaOptions"] = " ".join(executor)
    if settings.is_local:
        conf["spark.sql.shuffle.partitions"] = str(settings.shuffle_partitions)
        # One apply plans every map's deltas as one plan (one commit per batch): with a
        # few hundred maps that plan needs more than Spark's default 1g of driver heap.
        conf["spark.driver.memory"] = "3g"
    conf.update(settings.spark_conf)
    return conf


def spark_session(
    settings: Settings,
    app_name: str = "cumulus",
    extra_conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A SparkSession on the Cumulus catalog of `settings` (or the running one: Spark keeps
    one session per process, so a second call returns the first session)."""
    conf = spark_conf(settings, app_name)
    conf.update(extra_conf or {})
    if not (os.environ.get("JAVA_HOME") or shutil.which("java")):
        raise ConfigError("Java not found (no `java` on PATH, no $JAVA_HOME). Run `make setup`.")
    if settings.is_local:
        # Bind the local driver to loopback (and skip Spark's hostname warning).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # PySpark starts Python workers with $PYSPARK_PYTHON (default `python3` on PATH), not
    # with spark.pyspark.python, when the driver is a plain Python process.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings.home.mkdir(parents=True, exist_ok=True)
    settings.warehouse.mkdir(parents=True, exist_ok=True)

    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    import_hot_classes(spark)
    ensure_catalog_tables(spark, conf, settings.catalog)
    return spark


# The JVM classes PySpark names by their simple names most often: `functions` on every
# F.col/F.lit/F.when..., the others on every DataFrame call. Py4J resolves a simple name
# through the gateway's imports in order, and each package it is not in costs a
# ClassNotFoundException and a look into every jar on the class path (about 250):
# `functions` was five of those, 1 ms a call, thousands of calls per apply's plan. A
# single import is looked up first.
HOT_CLASSES = ("org.apache.spark.sql.functions", "org.apache.spark.sql.api.python.PythonSQLUtils",
               "org.apache.spark.api.python.PythonUtils", "org.apache.spark.sql.SparkSession")


def import_hot_classes(spark: SparkSession) -> None:
    """Single imports of HOT_CLASSES into the gateway's view that PySpark calls through."""
    from py4j.java_gateway import java_import

    for name in HOT_CLASSES:
        java_import(spark.sparkContext._jvm, name)


def ensure_catalog_tables(spark: SparkSession, conf: Mapping[str, str], catalog: str) -> None:
    """Create the JDBC catalog's own tables (idempotent) with a throwaway Iceberg
    JdbcCatalog that is closed at once, so the connection it leaks dies with it."""
    prefix = f"spark.sql.catalog.{catalog}."
    jvm = spark.sparkContext._jvm
    props = jvm.java.util.HashMap()
    for key, value in conf.items():
        if key.startswith(prefix) and key[len(prefix):] not in ("cache-enabled",):
            props.put(key[len(prefix):], value)
    props.put("jdbc.init-catalog-tables", "true")
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    cls = jvm.java.lang.Class.forName("org.apache.iceberg.jdbc.JdbcCatalog", True, loader)
    init_catalog = cls.getDeclaredConstructor(None).newInstance(None)
    init_catalog.setConf(spark.sparkContext._jsc.hadoopConfiguration())
    try:
        init_catalog.initialize(f"{catalog}-init", props)
    finally:
        init_catalog.close()
