"""The maps of a home, all in one Iceberg table, `maps.entries`: one row per delta of one
map entry, so a batch is one commit and a close one tag whatever the number of maps
(the paper keeps every map in one key-value store).

    map                  the map's name (identity partition: a map's rows are its files)
    k<i>_<type>          key i of the maps whose key i has that M3 type (key slots, added
                         by schema evolution as maps need them; NULL for other maps)
    v_int v_float v_decimal
                         the value, in the slot of the map's value type
    epoch source_id seq  the version of the delta that wrote the row

A map's slice (`map_slice`) is its rows with the slots renamed to its key names and
`value`. Apply appends deltas and nothing rewrites them on the hot path: an entry's value
at any snapshot is the sum of its rows (zero sums are absent entries), as every reader
computes it (lazy Cleanup). Compaction (the paper's Cleanup, amortized) rewrites the rows
of closed epochs as one row per entry, carrying the epoch compacted through (source_id
0): after a close once the delta rows outgrow `map_compaction_ratio` of the compacted
rows (and `map_compaction_min_rows`), and in maintenance. It is one overwrite commit that
changes no entry's value, so tags and branches read the same before and after, a crash
leaves either state, and a retry finds nothing to do."""

from __future__ import annotations

import decimal
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING, Any

from cumulus.config import Settings
from cumulus.m3.interpreter import EXACT, canonical
from cumulus.m3.validate import MapInfo
from cumulus.schema import DECIMAL_SCALE
from cumulus.spark.local import local_frame
from cumulus.store import commit
from cumulus.store.rows import scan_arrow
from cumulus.store.tables import MERGE_ON_READ, STABLE, Home, tables_of

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

log = logging.getLogger("cumulus.maps")

VERSION_COLUMNS = (("epoch", "BIGINT"), ("source_id", "INT"), ("seq", "BIGINT"))
VALUE_TYPES = ("int", "float", "decimal")
COMPACTED_SOURCE = 0  # source_id of the rows a compaction writes
COMPACTED_THROUGH = "cumulus.map-compacted-through"  # commit mark: the closed epoch compacted through

SPARK_DDL = {
    "int": "BIGINT",
    "float": "DOUBLE",
    "decimal": f"DECIMAL(38,{DECIMAL_SCALE})",
    "string": "STRING",
    "date": "DATE",
    "bool": "BOOLEAN",
}


def key_type(type_: str) -> DataType:
    """The Spark type of a key of M3 type `type_` (what the evaluator computes with)."""
    from pyspark.sql import types as T

    spark_types = {
        "int": T.LongType(),
        "float": T.DoubleType(),
        "decimal": T.DecimalType(38, DECIMAL_SCALE),
        "string": T.StringType(),
        "date": T.DateType(),
        "bool": T.BooleanType(),
    }
    return spark_types[type_]


def value_type(info: MapInfo) -> DataType:
    return key_type(info.type)


def key_slot(i: int, type_: str) -> str:
    return f"k{i}_{type_}"


def value_slot(type_: str) -> str:
    return f"v_{type_}"


def key_slots(info: MapInfo) -> list[str]:
    return [key_slot(i, t) for i, t in enumerate(info.key_types)]


def entries_scan(table: Any, snapshot_id: int | None, infos: Mapping[str, MapInfo], *, every: bool = False) -> Any:
    """A PyIceberg scan of maps.entries (a PyIceberg table) at `snapshot_id` (None: main)
    reading the key and value slots of the maps `infos` (name -> MapInfo): their
    partitions, or every map's (`every`: the caller wants most of them)."""
    from pyiceberg.expressions import AlwaysTrue, In

    columns = sorted({c for info in infos.values() for c in (*key_slots(info), value_slot(info.type))})
    present = set(table.schema().column_names)
    return table.scan(row_filter=AlwaysTrue() if every else In("map", sorted(infos)), snapshot_id=snapshot_id,
                      selected_fields=("map", *(c for c in columns if c in present)))


def read_entries(scan: Any, infos: Mapping[str, MapInfo], tasks: list | None = None,
                 keep: Callable[[str, Any], Any] | None = None) -> Callable[[str], dict[tuple, Any]]:
    """The entries of the maps `infos` planned by one `entries_scan` (`tasks`: those of its
    planned files to read, when the caller planned them): a function of a map's name
    giving {key tuple: value}. Each map is read when first asked for, from its own files
    (maps.entries is partitioned by map) and its own key and value slots: one scan of
    many maps' files and of all their slots, sorted by map, took 4.5 s for the corpus's
    small maps at SF 1, mostly in the sort and its Python list of names. `keep(name,
    rows)`: the Arrow rows of a map to sum (a caller reading some entries only)."""
    from pyiceberg.expressions import EqualTo

    by_map: dict[str, list] = {}
    for task in scan.plan_files() if tasks is None else tasks:
        by_map.setdefault(task.file.partition[0], []).append(task)
    cache: dict[str, dict[tuple, Any]] = {}

    def entries(name: str) -> dict[tuple, Any]:
        if name not in cache:
            info = infos[name]
            if name not in by_map:
                cache[name] = {}
                return cache[name]
            own = scan.update(row_filter=EqualTo("map", name),
                              selected_fields=(*key_slots(info), value_slot(info.type)))
            rows = scan_arrow(own, by_map[name])
            cache[name] = summed_entries(rows if keep is None else keep(name, rows), info)
        return cache[name]

    return entries


def summed_entries(rows: Any, info: MapInfo) -> dict[tuple, Any]:
    """A map's delta rows (an Arrow table of its key and value slots) summed per key, the
    keys whose sum is zero dropped: its entries."""
    from decimal import Decimal

    slots, value_column = key_slots(info), value_slot(info.type)
    totals: dict[tuple, Any] = {}
    columns = [rows.column(k).to_pylist() for k in slots]
    with decimal.localcontext(EXACT):  # (a sum of DECIMAL(38,6) rows: exact)
        for i, value in enumerate(rows.column(value_column).to_pylist()):
            key = tuple(canonical(c[i]) for c in columns)  # (a NaN key's rows: one entry)
            totals[key] = totals.get(key, 0) + value

    def typed(value: Any) -> Any:  # a DECIMAL(38,6) without its trailing zeros
        if info.type == "decimal" and isinstance(value, Decimal):
            return value.quantize(Decimal(1)) if value == value.to_integral_value() else value.normalize()
        return value

    return {k: typed(v) for k, v in totals.items() if v != 0}


def fixed_columns() -> list[tuple[str, str]]:
    return [("map", "STRING"), *((value_slot(t), SPARK_DDL[t]) for t in VALUE_TYPES), *VERSION_COLUMNS]


# Table properties of maps.entries: the fingerprint (cumulus.m3.printer.fingerprint) of
# the program whose maps it holds, and the first epoch whose tag holds them. Set by every
# step that makes the maps a program's whole state (a view's back-fill, a rebuild), and
# read by the steps that would write or read them with a program (engine/recompute.py).
PROGRAM = "cumulus.program"
PROGRAM_SINCE = "cumulus.program-since"


def program_mark(reader: Any, settings: Settings) -> tuple[str | None, int | None, int]:
    """(the fingerprint the maps were written with, the first epoch holding them, the
    rows of maps.entries now); (None, None, rows) for a home written before marks."""
    meta = commit.table_metadata(reader, tables_of(settings).maps)
    props = meta.get("properties") or {}
    since = props.get(PROGRAM_SINCE)
    return props.get(PROGRAM), (int(since) if since else None), commit.total_records(meta)


def mark_program(home: Home, fingerprint: str, since: int) -> None:
    home.spark.sql(f"ALTER TABLE {home.tables.maps} SET TBLPROPERTIES "
              f"('{PROGRAM}' = '{fingerprint}', '{PROGRAM_SINCE}' = '{since}')")


def ensure_maps_table(home: Home, maps: Iterable[MapInfo]) -> bool:
    """Create `maps.entries` if missing (with one empty snapshot, so it can be read and
    tagged before its first delta) and add the key slots `maps` need that it lacks. True
    when it was created."""
    table = home.tables.maps
    created = not home.spark.catalog.tableExists(table)
    if created:
        cols = ", ".join(f"`{c}` {t}" for c, t in fixed_columns())
        home.spark.sql(
            f"CREATE TABLE {table} ({cols}) USING iceberg PARTITIONED BY (`map`) "
            f"TBLPROPERTIES ('format-version' = '2', 'write.distribution-mode' = 'hash', {MERGE_ON_READ})"
        )
    have = set(home.spark.table(table).columns)
    needed: dict[str, str] = {}
    for info in maps:
        for slot, type_ in zip(key_slots(info), info.key_types, strict=True):
            if slot not in have:
                needed[slot] = SPARK_DDL[type_]
    if needed:
        home.spark.sql(f"ALTER TABLE {table} ADD COLUMNS ({', '.join(f'`{c}` {t}' for c, t in sorted(needed.items()))})")
    if created:
        # An empty first snapshot (an append of no rows commits one; DELETE ... WHERE false does
        # not), and the `stable` branch on it: views_stable.* read no entry before the first close.
        local_frame(home.spark, [], home.spark.table(table).schema).writeTo(table).append()
        home.spark.sql(f"ALTER TABLE {table} CREATE BRANCH IF NOT EXISTS `{STABLE}`")
    return created


def map_slice(entries: DataFrame, info: MapInfo) -> DataFrame:
    """The map's rows of an entries frame (any snapshot) as (key names..., value). A
    snapshot older than the map's key slots (added with its view, by a schema change
    that commits no snapshot) has no row of the map: its slots read as typed NULLs."""
    from pyspark.sql import functions as F

    have = set(entries.columns)
    keys = [
        (F.col(slot) if slot in have else F.lit(None).cast(key_type(t))).alias(name)
        for slot, t, name in zip(key_slots(info), info.key_types, info.key_names, strict=True)
    ]
    return entries.where(F.col("map") == info.name).select(*keys, F.col(value_slot(info.type)).alias("value"))


def entry_rows(
    deltas: DataFrame, info: MapInfo, columns: Sequence[tuple[str, DataType]], version: Mapping[str, int]
) -> DataFrame:
    """A map's deltas (k0..kn, value) as rows of the entries table, whose columns (name,
    type) are `columns`: the map's slots filled, the other slots NULL, the version columns
    (epoch, source_id, seq) the given numbers. One SQL projection: a single call into the
    JVM per map, however many slots the table has."""
    filled = {slot: f"k{i}" for i, slot in enumerate(key_slots(info))}
    filled[value_slot(info.type)] = "value"
    filled["map"] = "'" + info.name.replace("'", "''") + "'"
    filled.update({name: str(int(number)) for name, number in version.items()})
    return deltas.selectExpr(*[f"CAST({filled.get(c, 'NULL')} AS {t.simpleString()}) AS `{c}`" for c, t in columns])


def delta_columns(maps: Iterable[MapInfo]) -> list[tuple[str, DataType]]:
    """The columns of delta rows of `maps`: the entries table's without the version
    columns, and only the key slots these maps use."""
    from pyspark.sql import types as T

    slots = {slot: key_type(t) for info in maps for slot, t in zip(key_slots(info), info.key_types, strict=True)}
    return [("map", T.StringType()), *((value_slot(t), key_type(t)) for t in VALUE_TYPES), *sorted(slots.items())]


def summed(rows: DataFrame) -> DataFrame:
    """Delta rows (entries-shaped, without version columns) summed per entry: one row per
    map and key, zero sums dropped. The columns stay as they are."""
    from pyspark.sql import functions as F

    values = [value_slot(t) for t in VALUE_TYPES if value_slot(t) in rows.columns]
    keys = [c for c in rows.columns if c not in values]  # map and the key slots
    return (rows.groupBy(*keys).agg(*[F.sum(v).cast(rows.schema[v].dataType).alias(v) for v in values])
            .where(live(values)).select(*rows.columns))


def group_keys(deltas: DataFrame, slots: Mapping[str, tuple[tuple[str, int], ...]]) -> DataFrame:
    """The distinct group keys (`__g<i>`) of the delta rows of a view's maps (`slots`:
    the key slot of each group variable i per map, as cumulus.sql.mapsql.view_groups gives
    them): the groups whose rows they may change."""
    from pyspark.sql import functions as F

    parts = [deltas.where(F.col("map") == name).select(*(F.col(slot).alias(f"__g{i}") for slot, i in pairs))
             for name, pairs in slots.items()]
    return reduce(lambda a, b: a.unionByName(b), parts).distinct()


def live(values: Sequence[str] | None = None) -> Column:
    """True for a row whose value is not zero (nor NULL); `values`: the value slots it has
    (all of them by default)."""
    from pyspark.sql import functions as F

    # SQL text: one call into the JVM (built of Columns it was a dozen, 10 ms per use).
    slots = values if values is not None else [value_slot(t) for t in VALUE_TYPES]
    return F.expr(" OR ".join(f"coalesce(`{v}` != 0, false)" for v in slots))


def unversioned(rows: DataFrame) -> DataFrame:
    """Rows of maps.entries without their version columns (epoch, source_id, seq): delta
    rows, as `summed` and `negated` take them."""
    return rows.drop(*(c for c, _ in VERSION_COLUMNS))


def negated(rows: DataFrame) -> DataFrame:
    """Delta rows with every value negated."""
    from pyspark.sql import functions as F

    values = {value_slot(t) for t in VALUE_TYPES}
    return rows.select(*[(-F.col(c)).alias(c) if c in values else F.col(c) for c in rows.columns])


def versioned(rows: DataFrame, columns: Sequence[tuple[str, DataType]], version: Mapping[str, int]) -> DataFrame:
    """Delta rows as rows of the entries table, whose columns (name, type) are `columns`:
    the slots `rows` lacks NULL, the version columns (epoch, source_id, seq) the given
    numbers."""
    have = set(rows.columns)
    def expr(c: str) -> str:
        if c in version:
            return str(int(version[c]))
        return f"`{c}`" if c in have else "NULL"
    return rows.selectExpr(*[f"CAST({expr(c)} AS {t.simpleString()}) AS `{c}`" for c, t in columns])


def entries_columns(home: Home) -> list[tuple[str, DataType]]:
    return [(f.name, f.dataType) for f in home.spark.table(home.tables.maps).schema.fields]


@dataclass(frozen=True)
class MapRows:
    """Where the maps table stands since its last compaction, from its metadata alone:
    `pending` delta rows of epochs up to the one asked about were appended after it,
    which left `compacted_rows` rows (0: never compacted)."""

    pending: int
    compacted_rows: int


def map_rows_in(meta: Mapping[str, Any], through: int) -> MapRows:
    """The table's rows at its current snapshot (a metadata.json document): walks the
    ancestry back to the nearest compaction, counting the rows appended by deltas of
    epochs <= `through` (apply, repair and back-fill commits carry `cumulus.epoch`; file
    rewrites of maintenance add no rows and are skipped)."""
    pending = 0
    for summary in commit.summaries_back(meta):
        if COMPACTED_THROUGH in summary:
            return MapRows(pending, int(summary.get("total-records", 0)))
        if summary.get("operation") == "append" and int(summary.get(commit.EPOCH, through)) <= through:
            pending += int(summary.get("added-records", 0))
    return MapRows(pending, 0)


def compact_maps(home: Home, through: int, *, when_due: bool = False) -> int:
    """Rewrite the rows of epochs <= `through` (closed: nothing repairs them any more) of
    every map as one row per entry, zero sums dropped, and keep the later rows as they
    are, in one overwrite commit marked `cumulus.map-compacted-through`. Does nothing
    when no such row was appended since the last compaction, nor, `when_due` (the
    close), unless those rows exceed `map_compaction_ratio` times the rows it left and
    `map_compaction_min_rows`. Every snapshot reads the same values before and after.
    The caller holds the catalog lock. Returns the delta rows compacted (0: none)."""
    from pyspark.sql import functions as F

    table = home.tables.maps
    state = map_rows_in(commit.table_metadata(home.spark, table), through)
    due = state.pending > max(home.settings.map_compaction_ratio * state.compacted_rows, home.settings.map_compaction_min_rows)
    if state.pending == 0 or (when_due and not due):
        return 0
    started = time.perf_counter()
    rows = home.spark.table(table)
    columns = [(f.name, f.dataType) for f in rows.schema.fields]
    old = summed(unversioned(rows.where(F.col("epoch") <= through)))
    compacted = versioned(old, columns, {"epoch": through, "source_id": COMPACTED_SOURCE, "seq": 0})
    kept = rows.where(F.col("epoch") > through)
    props = commit.write_options({COMPACTED_THROUGH: through})
    compacted.unionByName(kept).writeTo(table).options(**props).overwrite(F.lit(True))
    log.info("maps: compacted %d delta rows through epoch %d (%.1f s)", state.pending, through, time.perf_counter() - started)
    return state.pending
