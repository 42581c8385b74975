"""The store's one reader protocol (cumulus/store/rows.py): a PyIceberg catalog reads
through IcebergRows, a Spark session through SparkRows (tests/spark/test_rows.py), a
RowReader as it is; anything else is refused, not guessed at by its attributes."""

from __future__ import annotations

import pytest
from pyiceberg.catalog.sql import SqlCatalog

from cumulus.store.rows import IcebergRows, SparkRows, is_spark, read_rows, row_reader


def test_a_catalog_reads_through_iceberg_rows(tmp_path) -> None:
    import pyarrow as pa

    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("cumulus")
    rows = pa.table({"epoch": pa.array([1, 2, 2], pa.int64()), "state": ["closed", "open", None]})
    catalog.create_table("cumulus.ledger", rows.schema).append(rows)
    reader = row_reader(catalog)
    assert isinstance(reader, IcebergRows) and row_reader(reader) is reader and not is_spark(catalog)
    assert read_rows(catalog, "t.cumulus.ledger", {"epoch": 2}) == [{"epoch": 2, "state": "open"},
                                                                   {"epoch": 2, "state": None}]
    assert read_rows(reader, "t.cumulus.ledger", {"state": None}) == [{"epoch": 2, "state": None}]


def test_anything_else_is_refused() -> None:
    class LooksLikeSpark:
        sparkContext = object()

    with pytest.raises(TypeError, match="SparkSession or a PyIceberg Catalog"):
        read_rows(LooksLikeSpark(), "t.cumulus.ledger")
    assert SparkRows.__dataclass_fields__.keys() == {"spark"}
