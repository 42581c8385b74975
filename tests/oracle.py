"""The independent oracle of the tests: DuckDB runs a view's SQL over the tuples alive at
a point of the stream. Nothing here shares code with the compiler or the interpreter."""

from __future__ import annotations

import duckdb
import pyarrow as pa

from cumulus.schema import Schema

_ARROW = {
    "int": pa.int64(),
    "float": pa.float64(),
    "string": pa.string(),
    "date": pa.date32(),
    "bool": pa.bool_(),
}


def _arrow_type(col) -> pa.DataType:
    if col.type == "decimal":
        return pa.decimal128(col.precision or 38, col.scale if col.scale is not None else 10)
    return _ARROW[col.type]


class DuckOracle:
    """One DuckDB database holding a snapshot of every relation (loaded in bulk)."""

    def __init__(self, schema: Schema, rows: dict[str, list[tuple]]):
        self.con = duckdb.connect()
        for rel in schema.relations:
            data = rows.get(rel.name, [])
            arrays = [
                pa.array([r[i] for r in data], type=_arrow_type(c)) for i, c in enumerate(rel.columns)
            ]
            table = pa.Table.from_arrays(arrays, names=list(rel.column_names))  # noqa: F841
            self.con.register(f"_{rel.name}_arrow", table)
            self.con.execute(f"CREATE TABLE {rel.name} AS SELECT * FROM _{rel.name}_arrow")
            self.con.unregister(f"_{rel.name}_arrow")

    def query(self, sql: str) -> list[tuple]:
        return self.con.execute(sql).fetchall()


def duckdb_result(schema: Schema, rows: dict[str, list[tuple]], sql: str) -> list[tuple]:
    return DuckOracle(schema, rows).query(sql)
