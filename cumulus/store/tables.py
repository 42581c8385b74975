"""The Iceberg tables of a Cumulus home, named and typed from the schema. Created by
`cumulus init`, written by ingestion and the engine, read by everything else.

    events.<rel>        relation columns, op (+1/-1), epoch, source_id, seq, ingested_at,
                        file, batch_id; partitioned by epoch; append-only
    base.<rel>          relation columns, mult: the relation's multiset as of the last fold
                        (a tuple's count sums its rows: compacted part + fold layers)
    cumulus.files       every file offered to ingestion, with checksum and outcome
    cumulus.quarantine  every rejected input row, with the reason
    cumulus.ledger      one row per epoch: state, timestamps, counts, snapshots, validation
    maps.*              the engine's maps (the namespace is created here)

Every name is qualified with the settings' catalog (`cumulus.events.orders`), so one
Spark session can work on several homes (`attach_catalog`). `tables_of(settings)` is the
home's tables by role (`.maps`, `.ledger_log`, `.events(rel)`, `.results(view)`, ...):
each a `Table`, its qualified name as a string, with its parts and its PyIceberg name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cumulus.config import Settings
from cumulus.errors import ConfigError, SchemaError
from cumulus.schema import Relation, Schema
from cumulus.spark.session import ensure_catalog_tables, spark_conf

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EVENTS, BASE, MAPS, META = "events", "base", "maps", "cumulus"
VIEWS, VIEWS_STABLE = "views", "views_stable"  # the registered views as catalog views: fresh, stable
RESULTS = "results"  # each view's rows at the stable epoch as a plain Iceberg table (engine/results.py)
ENTRIES = "entries"  # maps.entries: every map in one table (cumulus/store/maps.py)
NAMESPACES = (EVENTS, BASE, MAPS, META)
STABLE = "stable"  # the branch of every table at the stable (published) epoch
AUDIT = "audit"  # the branch of every table at the latest closed epoch, validated before it is published


def tag_name(epoch: int) -> str:
    """The tag a close puts on every table: `epoch-N`."""
    return f"epoch-{epoch}"

# The version and provenance columns that follow the relation's columns in events.<rel>.
EVENT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("op", "INT"),  # +1 insert, -1 delete
    ("epoch", "BIGINT"),
    ("source_id", "INT"),  # the source's priority
    ("seq", "BIGINT"),  # increasing in file and row order within (epoch, source)
    ("ingested_at", "TIMESTAMP"),
    ("file", "STRING"),  # the landing file the row came from
    ("batch_id", "STRING"),  # the ingest batch that committed the row
)
BASE_COLUMNS: tuple[tuple[str, str], ...] = (("mult", "BIGINT"),)

FILES_COLUMNS: tuple[tuple[str, str], ...] = (
    ("checksum", "STRING"),  # sha256 of the content; NULL on rolled-back markers
    ("source", "STRING"),
    ("source_id", "INT"),
    ("path", "STRING"),
    ("size", "BIGINT"),
    ("format", "STRING"),
    ("relation", "STRING"),  # the file's relation, NULL when rows name their own
    ("epoch", "BIGINT"),
    ("batch_id", "STRING"),
    ("status", "STRING"),  # ingested | duplicate | rejected | rolled-back
    ("rows_accepted", "BIGINT"),
    ("rows_rejected", "BIGINT"),
    ("seq_min", "BIGINT"),  # the seq range reserved for the file's rows
    ("seq_max", "BIGINT"),
    ("duplicate_of", "STRING"),  # batch that took the same content first
    ("relations", "STRING"),  # JSON {relation: {"accepted": n, "rejected": m}}
    ("detail", "STRING"),
    ("ingested_at", "TIMESTAMP"),
)

QUARANTINE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "BIGINT"),
    ("source", "STRING"),
    ("source_id", "INT"),
    ("file", "STRING"),
    ("checksum", "STRING"),
    ("line", "BIGINT"),  # 1-based line (row number for Parquet)
    ("relation", "STRING"),
    ("op", "INT"),
    ("raw", "STRING"),  # the input as written
    ("reason", "STRING"),  # a code of cumulus.ingest.validate.REASONS
    ("detail", "STRING"),  # what exactly: column, type, value
    ("epoch", "BIGINT"),
    ("batch_id", "STRING"),
    ("ingested_at", "TIMESTAMP"),
)

LEDGER_COLUMNS: tuple[tuple[str, str], ...] = (
    ("epoch", "BIGINT"),
    ("revision", "BIGINT"),  # the log's order: the latest revision of an epoch is its row
    ("state", "STRING"),  # open | applied | closed | published | failed-validation
    ("opened_at", "TIMESTAMP"),
    ("sealed_at", "TIMESTAMP"),  # when the epoch stopped taking input (left `open`)
    ("closed_at", "TIMESTAMP"),
    ("published_at", "TIMESTAMP"),
    ("updated_at", "TIMESTAMP"),
    ("events", "BIGINT"),
    ("rejected", "BIGINT"),
    ("files", "BIGINT"),
    ("batches", "BIGINT"),
    ("snapshots", "STRING"),  # JSON {table: snapshot id} at close
    ("metrics", "STRING"),  # JSON: timings, bytes and files scanned, ...
    ("validation", "STRING"),  # passed | failed | NULL (not validated yet)
    ("validation_detail", "STRING"),
    ("late_files", "STRING"),  # JSON: input that arrived after the epoch was sealed
)

# Column names a relation may not use: they would clash in events.* / base.*, or with the
# ingest job's own working columns (prefixed with two underscores).
RESERVED = frozenset(name for name, _ in EVENT_COLUMNS + BASE_COLUMNS)


class Table(str):
    """One Iceberg table of a home. The string is its qualified Spark name (catalog.
    namespace.table; `quoted`: the table in backticks, for names users choose freely),
    which SQL text and the DataFrame API take as it is; its parts are kept, so nothing
    splits the name again."""

    catalog: str
    namespace: str
    name: str
    quoted: bool

    def __new__(cls, catalog: str, namespace: str, name: str, quoted: bool = False) -> Table:
        last = "`" + name.replace("`", "``") + "`" if quoted else name
        table = super().__new__(cls, f"{catalog}.{namespace}.{last}")
        table.catalog, table.namespace, table.name, table.quoted = catalog, namespace, name, quoted
        return table

    def __reduce__(self):  # pickled (a Spark closure, a worker) as its parts, not as the string
        return Table, (self.catalog, self.namespace, self.name, self.quoted)

    @property
    def pyiceberg(self) -> str:
        """The name PyIceberg loads it by (namespace.table: the catalog is PyIceberg's own)."""
        return f"{self.namespace}.{self.name}"


@dataclass(frozen=True)
class HomeTables:
    """Every table of a home by its role, the one place their names are made
    (`tables_of(settings)`)."""

    catalog: str

    def _table(self, namespace: str, name: str, quoted: bool = False) -> Table:
        return Table(self.catalog, namespace, name, quoted)

    def events(self, relation: str) -> Table:
        return self._table(EVENTS, relation)

    def base(self, relation: str) -> Table:
        return self._table(BASE, relation)

    def results(self, view: str) -> Table:
        """A view's rows at each published epoch (cumulus/engine/results.py)."""
        return self._table(RESULTS, view, quoted=True)

    @property
    def maps(self) -> Table:
        """Every map's entries (cumulus/store/maps.py)."""
        return self._table(MAPS, ENTRIES)

    @property
    def files(self) -> Table:
        return self._table(META, "files")

    @property
    def quarantine(self) -> Table:
        return self._table(META, "quarantine")

    @property
    def ledger_log(self) -> Table:
        """The ledger's storage: append-only, one row per change of an epoch's row."""
        return self._table(META, "ledger_log")

    @property
    def ledger(self) -> Table:
        """The ledger as people read it (SQL, dbt): each epoch's latest row of the log (a view)."""
        return self._table(META, "ledger")

    @property
    def registry(self) -> Table:
        """The registered views (cumulus/store/registry.py)."""
        return self._table(META, "views")

    @property
    def applies(self) -> Table:
        """One row per apply (cumulus/engine/apply.py)."""
        return self._table(META, "applies")

    @property
    def results_marker(self) -> Table:
        """The epoch every results table shows, as a property (cumulus/engine/results.py)."""
        return self._table(RESULTS, "_published")


@dataclass(frozen=True)
class Home:
    """One home opened in one Spark session: what the store and engine functions take in
    place of the pair (`home.spark`, `home.settings`), with the home's tables by role
    (`home.tables`). The application layer (cumulus/app.py: `Engine.home`) makes it;
    a test or tool working on a second home makes one per home."""

    spark: SparkSession
    settings: Settings

    @property
    def tables(self) -> HomeTables:
        return tables_of(self.settings)

    @property
    def catalog(self) -> str:
        return self.settings.catalog


def tables_of(settings: Settings) -> HomeTables:
    """The tables of the settings' home."""
    return HomeTables(settings.catalog)


def pyiceberg_name(table: str) -> str:
    """A qualified Spark name (catalog.namespace.table) as PyIceberg names it: the
    catalog dropped."""
    return table.pyiceberg if isinstance(table, Table) else table.split(".", 1)[1]


def ledger_view_sql(settings: Settings) -> str:
    columns = ", ".join(f"`{name}`" for name, _ in LEDGER_COLUMNS)
    return (
        f"SELECT {columns} FROM (SELECT *, row_number() OVER (PARTITION BY epoch ORDER BY revision DESC) "
        f"AS latest FROM {tables_of(settings).ledger_log}) WHERE latest = 1"
    )


def ddl_type(columns: Sequence[tuple[str, str]]) -> str:
    """A Spark DDL schema string ("a STRING, b BIGINT"), e.g. for local_frame."""
    return ", ".join(f"`{name}` {type_}" for name, type_ in columns)


def relation_columns(relation: Relation) -> tuple[tuple[str, str], ...]:
    return tuple((c.name, c.sql_type) for c in relation.columns)


def events_columns(relation: Relation) -> tuple[tuple[str, str], ...]:
    return relation_columns(relation) + EVENT_COLUMNS


def base_columns(relation: Relation) -> tuple[tuple[str, str], ...]:
    return relation_columns(relation) + BASE_COLUMNS


def check_relation_names(schema: Schema) -> None:
    """Refuse relations whose column names clash with the version columns."""
    for rel in schema.relations:
        for col in rel.columns:
            if col.name in RESERVED or col.name.startswith("__"):
                raise SchemaError(
                    f"column {rel.name}.{col.name} uses a name Cumulus reserves for its own "
                    f"columns ({', '.join(sorted(RESERVED))}, or a leading `__`); rename it"
                )


_PROPERTIES = "TBLPROPERTIES ('format-version' = '2'{extra})"

# Row-level changes (any row-level SQL a user runs on maps.* or base.*, which applies
# and folds only append to) write position-delete files and
# the new rows instead of rewriting every data file holding a touched row: an epoch
# writes what its events change, not the files they land in. Maintenance's compaction
# folds the deletes back into the data files (docs/airflow.md, Maintenance).
MERGE_ON_READ_PROPERTIES = {f"write.{op}.mode": "merge-on-read" for op in ("merge", "update", "delete")}
MERGE_ON_READ = ", ".join(f"'{name}' = '{value}'" for name, value in MERGE_ON_READ_PROPERTIES.items())


def create_statements(settings: Settings, schema: Schema) -> list[str]:
    """CREATE ... IF NOT EXISTS statements for every namespace and table of a home."""
    stmts = [f"CREATE NAMESPACE IF NOT EXISTS {settings.catalog}.{ns}" for ns in NAMESPACES]
    for rel in schema.relations:
        stmts.append(
            f"CREATE TABLE IF NOT EXISTS {tables_of(settings).events(rel.name)} "
            f"({ddl_type(events_columns(rel))}) USING iceberg PARTITIONED BY (epoch) "
            # Each task appends its own files: a batch is all in one epoch partition.
            + _PROPERTIES.format(extra=", 'write.distribution-mode' = 'none'")
        )
        stmts.append(
            f"CREATE TABLE IF NOT EXISTS {tables_of(settings).base(rel.name)} "
            f"({ddl_type(base_columns(rel))}) USING iceberg " + _PROPERTIES.format(extra=", " + MERGE_ON_READ)
        )
    for name, cols in (
        (tables_of(settings).files, FILES_COLUMNS),
        (tables_of(settings).quarantine, QUARANTINE_COLUMNS),
        (tables_of(settings).ledger_log, LEDGER_COLUMNS),
    ):
        stmts.append(
            f"CREATE TABLE IF NOT EXISTS {name} ({ddl_type(cols)}) USING iceberg "
            + _PROPERTIES.format(extra="")
        )
    stmts.append(f"CREATE VIEW IF NOT EXISTS {tables_of(settings).ledger} AS {ledger_view_sql(settings)}")
    return stmts


def attach_catalog(home: Home) -> None:
    """Make the home's catalog usable in its Spark session (a no-op for the session's own home).
    Spark keeps one session per process; a test or tool working on a second home
    registers that home's catalog under its own name."""
    conf = spark_conf(home.settings)
    key = f"spark.sql.catalog.{home.catalog}"
    uri_key = f"{key}.uri"
    current = home.spark.conf.get(uri_key, None)
    if current == conf[uri_key]:
        return
    if current is not None:
        raise ConfigError(
            f"this Spark session already uses catalog {home.catalog!r} for {current}; "
            f"give the home {home.settings.home} another catalog name (catalog = ... in cumulus.toml)"
        )
    home.settings.home.mkdir(parents=True, exist_ok=True)
    home.settings.warehouse.mkdir(parents=True, exist_ok=True)
    for name, value in conf.items():
        if name == key or name.startswith(key + "."):
            home.spark.conf.set(name, value)
    ensure_catalog_tables(home.spark, conf, home.catalog)


_ensured: set[tuple[str, str, tuple]] = set()  # (catalog uri, table, columns) done in this process


def ensure_table(spark: SparkSession, table: str, columns: Sequence[tuple[str, str]]) -> None:
    """Create a bookkeeping table, or add the columns a newer Cumulus writes to one an
    older version created (Iceberg schema evolution: old rows read NULL there). Once per
    process and table: a long-lived engine does not pay the catalog round trips again."""
    catalog = table.split(".", 1)[0]
    key = (spark.conf.get(f"spark.sql.catalog.{catalog}.uri", ""), table, tuple(columns))
    if key in _ensured:
        return
    spark.sql(f"CREATE TABLE IF NOT EXISTS {table} ({ddl_type(columns)}) USING iceberg")
    have = {f.name for f in spark.table(table).schema.fields}
    for name, type_ in columns:
        if name not in have:
            spark.sql(f"ALTER TABLE {table} ADD COLUMN {name} {type_}")
    _ensured.add(key)
