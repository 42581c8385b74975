"""JVM-free access to the Cumulus catalog: a PyIceberg SqlCatalog on the same database and
warehouse as the Spark session's Iceberg JDBC catalog, so it sees the same tables."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from cumulus.config import Settings
from cumulus.errors import ConfigError

if TYPE_CHECKING:
    from pyiceberg.catalog.sql import SqlCatalog


def sqlalchemy_uri(settings: Settings) -> str:
    """The SQLAlchemy uri of the catalog database named by the JDBC `catalog_uri`."""
    uri = settings.catalog_uri
    if uri.startswith("jdbc:sqlite:"):
        path = uri.removeprefix("jdbc:sqlite:").split("?", 1)[0]
        # Wait for a writer (Spark) instead of failing at once with "database is locked".
        return f"sqlite:///{path}?timeout=30"
    if uri.startswith("jdbc:postgresql://"):
        rest = uri.removeprefix("jdbc:postgresql://").split("?", 1)[0]
        auth = ""
        if settings.catalog_user:
            auth = quote(settings.catalog_user, safe="")
            if settings.catalog_password:
                auth += ":" + quote(settings.catalog_password, safe="")
            auth += "@"
        return f"postgresql+psycopg2://{auth}{rest}"
    raise ConfigError(
        f"no PyIceberg equivalent for catalog uri {uri!r} (sqlite or postgresql only)"
    )


def pyiceberg_properties(settings: Settings) -> dict[str, str]:
    """The PyIceberg catalog properties matching the Spark catalog: the warehouse, and for
    an object-store warehouse set through the [spark] table of cumulus.toml
    (`sql.catalog.<name>.warehouse = "s3://..."`, `.s3.endpoint`, `.s3.path-style-access`,
    `.client.region`) the same endpoint, addressing and region for PyArrow's S3 file
    system. Credentials are not copied: PyArrow takes them from the AWS environment
    variables, as S3FileIO does."""
    prefix = f"sql.catalog.{settings.catalog}."
    spark = {k.removeprefix("spark.").removeprefix(prefix): str(v) for k, v in settings.spark_conf.items()
             if k.removeprefix("spark.").startswith(prefix)}
    props = {"uri": sqlalchemy_uri(settings), "warehouse": spark.get("warehouse", f"file://{settings.warehouse}")}
    if "s3.endpoint" in spark:
        props["s3.endpoint"] = spark["s3.endpoint"]
    if "s3.path-style-access" in spark:
        props["s3.force-virtual-addressing"] = str(spark["s3.path-style-access"].lower() != "true").lower()
    if "client.region" in spark:
        props["s3.region"] = spark["client.region"]
    return props


def pyiceberg_catalog(settings: Settings) -> SqlCatalog:
    """A PyIceberg SqlCatalog named like the Spark catalog, on the same tables."""
    from pyiceberg.catalog.sql import SqlCatalog

    if settings.is_sqlite:
        settings.home.mkdir(parents=True, exist_ok=True)
    return SqlCatalog(settings.catalog, schema_version="v1", **pyiceberg_properties(settings))


_SHARED: dict[tuple, SqlCatalog] = {}  # (catalog, its properties) -> one catalog per process


def shared_catalog(settings: Settings) -> SqlCatalog:
    """`pyiceberg_catalog(settings)`, made once per process: a long-lived engine or server
    reads through it at every step, and a catalog opens its database connections once."""
    key = (settings.catalog, tuple(sorted(pyiceberg_properties(settings).items())))
    catalog = _SHARED.get(key)
    if catalog is None:
        catalog = _SHARED.setdefault(key, pyiceberg_catalog(settings))
    return catalog


PYICEBERG_CONFIG = ".pyiceberg.yaml"  # in the home: PyIceberg's own configuration file


def write_pyiceberg_config(settings: Settings) -> Path:
    """Write <home>/.pyiceberg.yaml, PyIceberg's configuration of this home's catalog, so
    any PyIceberg program reads the home's tables with no Cumulus code:

        PYICEBERG_HOME=<home> python -c "from pyiceberg.catalog import load_catalog;
            print(load_catalog('<catalog>').load_table('results.<view>').scan().to_pandas())"

    A PostgreSQL catalog's password is left out: give it in the environment
    (PYICEBERG_CATALOG__<CATALOG>__URI with the password, PyIceberg's own override)."""
    import yaml

    props = dict(pyiceberg_properties(settings))
    if settings.catalog_password:
        props["uri"] = props["uri"].replace(f":{quote(settings.catalog_password, safe='')}@", "@")
    props = {"type": "sql", "schema_version": "v1", **props}
    path = settings.home / PYICEBERG_CONFIG
    header = ("# Written by `cumulus init`: PyIceberg's configuration of this home's catalog.\n"
              f"# PYICEBERG_HOME={settings.home} makes load_catalog({settings.catalog!r}) read it.\n")
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(header + yaml.safe_dump({"catalog": {settings.catalog: props}}, sort_keys=True))
    tmp.replace(path)
    return path
