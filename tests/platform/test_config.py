"""Settings, jar lookup and the Spark configuration, without a JVM (unit tier)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from cumulus.config import Settings, load_settings, settings_from_args
from cumulus.errors import ConfigError, NotAHomeError
from cumulus.spark import jars
from cumulus.spark.session import spark_conf
from cumulus.store.catalog import sqlalchemy_uri

REPO = Path(__file__).resolve().parents[2]


def test_defaults_derive_from_home(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = load_settings()
    assert s.home == tmp_path / ".cumulus"
    assert s.catalog == "cumulus"
    assert s.spark_master == "local[*]"
    assert s.catalog_uri == (
        f"jdbc:sqlite:{tmp_path}/.cumulus/catalog.db?journal_mode=WAL&busy_timeout=30000"
    )
    assert s.warehouse == tmp_path / ".cumulus" / "warehouse"


def test_environment_then_arguments(tmp_path, monkeypatch):
    monkeypatch.setenv("CUMULUS_HOME", str(tmp_path / "env-home"))
    monkeypatch.setenv("CUMULUS_SPARK_MASTER", "spark://127.0.0.1:7077")
    assert load_settings().home == tmp_path / "env-home"
    assert load_settings().spark_master == "spark://127.0.0.1:7077"
    args = argparse.Namespace(home=str(tmp_path / "cli-home"))
    assert settings_from_args(args, require_home=False).home == tmp_path / "cli-home"
    assert settings_from_args(argparse.Namespace(home=None), require_home=False).home == tmp_path / "env-home"
    with pytest.raises(NotAHomeError, match="env-home is not a Cumulus home"):
        settings_from_args(argparse.Namespace(home=None))


def test_toml_overrides_and_spark_table(tmp_path, monkeypatch):
    (tmp_path / "cumulus.toml").write_text(
        'catalog = "lake"\n'
        'catalog_uri = "jdbc:postgresql://127.0.0.1:5432/cumulus"\n'
        'catalog_user = "cu"\n'
        "shuffle_partitions = 8\n"
        "[spark]\n"
        'driver.memory = "2g"\n'
        '"spark.sql.adaptive.enabled" = false\n'
    )
    s = load_settings(tmp_path)
    assert (s.catalog, s.catalog_user, s.shuffle_partitions) == ("lake", "cu", 8)
    assert dict(s.spark_conf) == {
        "spark.driver.memory": "2g",
        "spark.sql.adaptive.enabled": "false",
    }
    assert sqlalchemy_uri(s) == "postgresql+psycopg2://cu@127.0.0.1:5432/cumulus"
    monkeypatch.setenv("CUMULUS_CATALOG", "env-wins")
    assert load_settings(tmp_path).catalog == "env-wins"


def test_bad_settings_say_where(tmp_path):
    (tmp_path / "cumulus.toml").write_text('colour = "blue"\n')
    with pytest.raises(ConfigError, match="unknown setting.*colour.*cumulus.toml"):
        load_settings(tmp_path)
    with pytest.raises(ConfigError, match="must be a JDBC uri"):
        Settings(home=tmp_path, catalog_uri="sqlite:///x.db")


def test_pyiceberg_uri_matches_spark_catalog(tmp_path):
    s = Settings(home=tmp_path)
    assert sqlalchemy_uri(s) == f"sqlite:///{tmp_path}/catalog.db?timeout=30"


def test_spark_conf_wires_the_catalog(tmp_path, monkeypatch):
    jar_dir = tmp_path / "jars"
    jar_dir.mkdir()
    for name in (jars.ICEBERG_RUNTIME, jars.ICEBERG_JACKSON, jars.SQLITE_JDBC):
        (jar_dir / name).write_bytes(b"")
    monkeypatch.setenv("CUMULUS_JARS_DIR", str(jar_dir))
    monkeypatch.setattr(jars, "SYSTEM_JARS", tmp_path / "no-system-jars")
    s = Settings(home=tmp_path / "home", spark_conf={"spark.driver.memory": "2g"})
    conf = spark_conf(s, app_name="t")
    assert conf["spark.sql.defaultCatalog"] == "cumulus"
    assert conf["spark.sql.catalog.cumulus.type"] == "jdbc"
    assert conf["spark.sql.catalog.cumulus.jdbc.schema-version"] == "V1"
    assert conf["spark.sql.catalog.cumulus.uri"] == s.catalog_uri
    assert conf["spark.sql.catalog.cumulus.warehouse"] == str(tmp_path / "home" / "warehouse")
    # a local master: the jars on the driver's class path (no copy per SparkContext), not spark.jars
    assert conf["spark.driver.extraClassPath"].split(os.pathsep) == [
        str(jar_dir / n) for n in (jars.ICEBERG_RUNTIME, jars.ICEBERG_JACKSON, jars.SQLITE_JDBC)
    ]
    assert "spark.jars" not in conf
    assert conf["spark.ui.enabled"] == "false"
    assert conf["spark.sql.shuffle.partitions"] == "4"
    assert conf["spark.driver.memory"] == "2g"
    assert (
        f"-Dderby.system.home={tmp_path / 'home' / 'derby'}"
        in conf["spark.driver.extraJavaOptions"]
    )


def test_the_driver_jvm_maps_the_class_archive_once_it_exists(tmp_path, monkeypatch):
    """The class-data archive is used once it exists, and written where
    scripts/class_archive.py asks, with the JVM's own log off but for errors; options
    from $CUMULUS_JVM_OPTIONS come last."""
    from cumulus.spark.session import DUMP_ARCHIVE, JVM_OPTIONS, driver_java_options, spark_conf

    archive = tmp_path / "spark.jsa"
    monkeypatch.setenv("CUMULUS_CLASS_ARCHIVE", str(archive))
    monkeypatch.delenv(DUMP_ARCHIVE, raising=False)
    monkeypatch.delenv(JVM_OPTIONS, raising=False)
    s = Settings(home=tmp_path / "home")
    assert driver_java_options(s) == f"-Dderby.system.home={tmp_path / 'home' / 'derby'}"  # no archive yet
    archive.write_bytes(b"x")
    options = driver_java_options(s).split()
    assert f"-XX:SharedArchiveFile={archive}" in options and options[-2:] == ["-Xlog:disable", "-Xlog:all=error:stderr"]
    monkeypatch.setenv(DUMP_ARCHIVE, str(tmp_path / "new.jsa"))
    options = driver_java_options(s).split()
    assert f"-XX:ArchiveClassesAtExit={tmp_path / 'new.jsa'}" in options and not any("SharedArchive" in o for o in options)
    assert options[-2:] == ["-Xlog:disable", "-Xlog:all=error:stderr"]
    monkeypatch.setenv(JVM_OPTIONS, "-XX:TieredStopAtLevel=1  -Xss4m")
    assert driver_java_options(s).split()[-3:] == ["-Xlog:all=error:stderr", "-XX:TieredStopAtLevel=1", "-Xss4m"]
    # A cluster's executors get them too; a local master's executor is the driver's JVM.
    assert "spark.executor.extraJavaOptions" not in spark_conf(s)
    on_cluster = Settings(home=tmp_path / "home", spark_master="spark://127.0.0.1:7077")
    assert spark_conf(on_cluster)["spark.executor.extraJavaOptions"] == "-XX:TieredStopAtLevel=1 -Xss4m"


def test_the_class_archive_is_named_by_its_class_path(tmp_path, monkeypatch):
    """A JVM silently ignores an archive dumped with another class path (or another jar
    at the same path): the name carries the class path, sizes and times included, so a
    stale archive is missing (setup builds it again) rather than quietly useless."""
    monkeypatch.delenv("CUMULUS_CLASS_ARCHIVE", raising=False)
    monkeypatch.setattr(jars, "_java_version", lambda: "17.0.15")
    a, b = tmp_path / "a.jar", tmp_path / "b.jar"
    a.write_bytes(b"a")
    b.write_bytes(b"b")
    first = jars.class_archive([a, b])
    assert first == jars.class_archive([a, b]) and first.name.startswith("spark-") and first.suffix == ".jsa"
    assert len({first, jars.class_archive([a]), jars.class_archive([b, a]), jars.class_archive([])}) == 4
    a.write_bytes(b"a, rebuilt")
    assert jars.class_archive([a, b]) != first
    monkeypatch.setenv("CUMULUS_CLASS_ARCHIVE", str(tmp_path / "mine.jsa"))
    assert jars.class_archive([a, b]) == tmp_path / "mine.jsa"


def test_a_cluster_gets_the_jars_through_spark_jars(tmp_path, monkeypatch):
    """Executors of a cluster fetch the jars from spark.jars; the driver's class path
    (and so its class-data archive) stays Spark's own."""
    from cumulus.spark.session import driver_class_path

    jar_dir = tmp_path / "jars"
    jar_dir.mkdir()
    for name in (jars.ICEBERG_RUNTIME, jars.ICEBERG_JACKSON, jars.SQLITE_JDBC):
        (jar_dir / name).write_bytes(b"")
    monkeypatch.setenv("CUMULUS_JARS_DIR", str(jar_dir))
    s = Settings(home=tmp_path / "home", spark_master="spark://host:7077")
    conf = spark_conf(s)
    assert conf["spark.jars"].split(",")[0] == str(jar_dir / jars.ICEBERG_RUNTIME)
    assert "spark.driver.extraClassPath" not in conf and driver_class_path(s) == []


def test_missing_jars_ask_for_make_setup(tmp_path, monkeypatch):
    monkeypatch.setenv("CUMULUS_JARS_DIR", str(tmp_path / "empty"))
    with pytest.raises(ConfigError, match=r"iceberg-jackson-shaded\.jar.*make setup"):
        spark_conf(Settings(home=tmp_path))


def test_both_catalogs_share_one_class_path(tmp_path, monkeypatch):
    """Each JDBC driver that is installed goes on the class path, whichever catalog the
    home uses (one class path, one class-data archive); the catalog's own is required."""
    jar_dir = tmp_path / "jars"
    jar_dir.mkdir()
    names = (jars.ICEBERG_RUNTIME, jars.ICEBERG_JACKSON, jars.SQLITE_JDBC, jars.POSTGRESQL_JDBC)
    for name in names:
        (jar_dir / name).write_bytes(b"")
    monkeypatch.setenv("CUMULUS_JARS_DIR", str(jar_dir))
    monkeypatch.setattr(jars, "SYSTEM_JARS", tmp_path / "no-system-jars")
    everything = [jar_dir / n for n in names]
    assert jars.spark_jars("jdbc:sqlite:/h/catalog.db") == everything
    assert jars.spark_jars("jdbc:postgresql://db:5432/cumulus") == everything
    (jar_dir / jars.POSTGRESQL_JDBC).unlink()
    assert jars.spark_jars("jdbc:sqlite:/h/catalog.db") == everything[:3]
    with pytest.raises(ConfigError, match=r"postgresql\.jar.*make setup"):
        jars.spark_jars("jdbc:postgresql://db:5432/cumulus")


def test_pyiceberg_follows_an_object_store_warehouse(tmp_path):
    """The docker-compose home puts the warehouse on MinIO through the [spark] table; the
    PyIceberg catalog (reads without a JVM) gets the same warehouse, endpoint, path-style
    addressing and region, and its file IO opens an S3 file system for the warehouse."""
    from pyiceberg.io.pyarrow import PyArrowFileIO

    from cumulus.store.catalog import pyiceberg_properties

    (tmp_path / "cumulus.toml").write_text((REPO / "docker" / "cumulus.toml").read_text())
    props = pyiceberg_properties(load_settings(tmp_path))
    assert props["warehouse"] == "s3://cumulus-warehouse/"
    assert (props["s3.endpoint"], props["s3.force-virtual-addressing"], props["s3.region"]) == (
        "http://minio:9000", "false", "us-east-1")
    assert type(PyArrowFileIO(props).fs_by_scheme("s3", "cumulus-warehouse")).__name__ == "S3FileSystem"
    # The embedded default: the home's warehouse folder, nothing for S3.
    local = pyiceberg_properties(load_settings(tmp_path / "embedded"))
    assert local["warehouse"] == f"file://{tmp_path / 'embedded' / 'warehouse'}"
    assert not any(k.startswith("s3.") for k in local)


def test_a_source_is_removed_from_the_toml_and_nothing_else(tmp_path):
    from cumulus.ingest.sources import add_source, load_sources, remove_source

    home = tmp_path / "h"
    home.mkdir()
    (home / "cumulus.toml").write_text('catalog = "lake"\n\n[ingest]\nmax_error_rate = 0.2\n')
    settings = load_settings(home)
    add_source(settings, "pos", 1)
    add_source(settings, "web", 2, max_error_rate=0.1)
    add_source(settings, "app", 3, landing=str(tmp_path / "drop"))
    with (home / "cumulus.toml").open("a") as fh:
        fh.write("\n[spark]\n# driver memory for the big loads\n\"driver.memory\" = \"2g\"\n")
    before = (home / "cumulus.toml").read_text()

    with pytest.raises(ConfigError, match=r"source 'web' has ingested batches in epoch\(s\) 4, not closed yet"):
        remove_source(settings, "web", pending=[4])
    assert (home / "cumulus.toml").read_text() == before

    removed = remove_source(settings, "web", pending=[])
    assert removed.priority == 2 and (home / "landing" / "web").is_dir()  # its landing folder stays
    left = load_sources(settings)
    assert sorted(left) == ["app", "pos"] and left["app"].landing == tmp_path / "drop"
    assert left["pos"].max_error_rate == 0.2
    text = (home / "cumulus.toml").read_text()
    assert "web" not in text and '"driver.memory" = "2g"' in text and "# driver memory" in text
    assert load_settings(home).spark_conf == {"spark.driver.memory": "2g"}
    with pytest.raises(ConfigError, match="unknown source 'web'"):
        remove_source(settings, "web", pending=[])
