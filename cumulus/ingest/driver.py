"""The ingest of a small batch in the driver, with no Spark job: on a local master, a
batch of new files of at most `ingest_local_bytes` is parsed here (parse.py's parsers:
the records Spark's tasks would yield), its deletes are judged for liveness over
PyIceberg reads of base.<rel> and the unfolded events (liveness.not_alive_in_driver), and
its quarantine rows, events.<rel> rows and manifest rows are appended by PyIceberg
commits (store/rows.py, append_rows).

The rows, their versions and quarantine ids, the commits' order and their snapshot
summaries (the batch id, source and epoch) are those of the Spark way (job.py), so
recovery (store/batches.py) and every reader see no difference; only the writer differs.
A Spark plan costs about a second of planning, scheduling and commit per micro-batch of a
few rows (three appends and six reads); these commits cost tens of milliseconds each. A
batch whose deletes are too many to judge here is judged and written by Spark after all
(`DriverBatch.frames`: its parsed rows as local frames)."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cumulus.ingest.liveness import not_alive_in_driver
from cumulus.ingest.parse import META_NAMES, local_stats, parse_rows, spark_ddl
from cumulus.ingest.plan import InputFile, Unit
from cumulus.schema import Relation, Schema
from cumulus.spark.local import local_arrow, local_frame
from cumulus.store.fold import folded_through
from cumulus.store.quarantine import next_id
from cumulus.store.rows import append_rows
from cumulus.store.tables import QUARANTINE_COLUMNS, Home, ddl_type, events_columns

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyspark.sql import DataFrame

NOT_ALIVE = "not_alive"


@dataclass
class DriverBatch:
    """A batch's parsed records, by relation (None: the rows that name no relation of the
    schema), as tuples of META then the relation's columns."""

    schema: Schema
    rows: dict[str | None, list[tuple]]

    @classmethod
    def parse(cls, units: list[Unit], schema: Schema) -> DriverBatch:
        parsed = {name: parse_rows(units, schema, name) for name in [*schema.names, None]}
        return cls(schema, {name: rows for name, rows in parsed.items() if rows is not None})

    def stats(self) -> list:
        """Per file, relation, reason and op: rows (n) and positions (lo, hi)."""
        return [stat for rows in self.rows.values() for stat in local_stats(rows)]

    def frames(self, home: Home) -> dict[str | None, DataFrame]:
        """The records as the local frames the Spark way takes (parse.parse_relation's)."""
        return {name: local_frame(home.spark, rows, spark_ddl(self.schema.relation(name) if name else None))
                for name, rows in self.rows.items()}

    def valid(self, relation: Relation) -> list[dict]:
        """The relation's valid rows as dicts (its columns and META)."""
        names = (*META_NAMES, *relation.column_names)
        reason = META_NAMES.index("__reason")
        return [dict(zip(names, row, strict=True)) for row in self.rows.get(relation.name, ()) if row[reason] is None]

    def not_alive(self, home: Home, catalog: Catalog) -> dict[str, list[dict]] | None:
        """The deletes that find no live copy, per relation (liveness.py); None when some
        relation's are too many to judge here."""
        from pyiceberg.expressions import GreaterThan

        dead: dict[str, list[dict]] = {}
        for relation in self.schema.relations:
            batch = self.valid(relation)
            if not any(r["__op"] < 0 for r in batch):
                continue
            unfolded = GreaterThan("epoch", folded_through(home, relation.name))
            rejected = not_alive_in_driver(catalog, relation, batch, home.tables.base(relation.name).pyiceberg,
                                           home.tables.events(relation.name).pyiceberg, unfolded)
            if rejected is None:
                return None
            if rejected:
                dead[relation.name] = [r for r in batch if (r["__unit"], r["__pos"]) in rejected]
        return dead

    def write_quarantine(self, home: Home, catalog: Catalog, dead: Mapping[str, list[dict]], files: list[InputFile],
                         units: list[Unit], source: tuple[str, int], epoch: int, batch_id: str, now: dt.datetime,
                         props: Mapping[str, Any], detail: str) -> int:
        """One append of every rejected row (the not-alive deletes with `detail`), ids in
        (unit, position) order from the first free one, as the Spark way numbers them;
        returns how many."""
        at = {name: META_NAMES.index(name) for name in META_NAMES}
        rejected = [(row[at["__unit"]], row[at["__pos"]], row[at["__file"]], row[at["__line"]], row[at["__relation"]],
                     row[at["__op"]], row[at["__raw"]], row[at["__reason"]], row[at["__detail"]])
                    for rows in self.rows.values() for row in rows if row[at["__reason"]] is not None]
        rejected += [(r["__unit"], r["__pos"], r["__file"], r["__line"], name, r["__op"], r["__raw"], NOT_ALIVE, detail)
                     for name, rows in dead.items() for r in rows]
        per_unit = Counter(r[0] for r in rejected)
        base, acc = {}, 0
        for unit in units:
            base[unit.index], acc = acc, acc + per_unit[unit.index]
        first = next_id(catalog, home.settings)
        by_index = {f.index: f for f in files}
        rows, rank = [], Counter()
        for unit, _, file, line, relation, op, raw, reason, what in sorted(rejected, key=lambda r: (r[0], r[1])):
            rows.append((first + base[unit] + rank[unit], source[0], source[1], by_index[file].path,
                         by_index[file].checksum, line, relation, op, raw, reason, what, epoch, batch_id, now))
            rank[unit] += 1
        append_rows(home.settings, home.tables.quarantine, local_arrow(rows, ddl_type(QUARANTINE_COLUMNS)), props)
        return len(rows)

    def write_events(self, home: Home, relation: Relation, dead: list[dict], files: list[InputFile],
                     unit_base: Mapping[int, int], offset: int, source_id: int, epoch: int, batch_id: str,
                     now: dt.datetime, props: Mapping[str, Any]) -> None:
        """One append of the relation's accepted rows to events.<rel>, each at seq =
        `offset` + its unit's base + its position (as the Spark way writes them)."""
        gone = {(r["__unit"], r["__pos"]) for r in dead}
        by_index = {f.index: f for f in files}
        rows = [(*(r[c] for c in relation.column_names), r["__op"], epoch, source_id,
                 offset + unit_base[by_index[r["__file"]].unit] + r["__pos"], now, by_index[r["__file"]].path, batch_id)
                for r in self.valid(relation) if (r["__unit"], r["__pos"]) not in gone]
        append_rows(home.settings, home.tables.events(relation.name), local_arrow(rows, ddl_type(events_columns(relation))),
                    props)

