"""PyIceberg scans read each data file once per process (cumulus.store.rows.scan_arrow):
after appends only the new files are read, and the rows equal a plain scan's after
appends, an overwrite and with a filter. No JVM: a PyIceberg SqlCatalog on SQLite."""

from __future__ import annotations

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo
from pyiceberg.io import pyarrow as pyiceberg_arrow

from cumulus.store import rows as rows_module
from cumulus.store.rows import scan_arrow


def _sorted(table: pa.Table) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda r: (r["epoch"], r["state"]))


def test_appends_read_only_the_new_files_and_every_scan_is_exact(tmp_path, monkeypatch):
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/w")
    catalog.create_namespace("ns")
    schema = pa.schema([("epoch", pa.int64()), ("state", pa.string())])
    table = catalog.create_table("ns.log", schema=schema)
    rows_module._FILES.clear()
    rows_module._FILES_BYTES[0] = 0
    for epoch in range(1, 6):
        table.append(pa.table({"epoch": [epoch, epoch], "state": ["open", "closed"]}, schema=schema))
        table = catalog.load_table("ns.log")
        assert _sorted(scan_arrow(table.scan())) == _sorted(table.scan().to_arrow())
        assert len(rows_module._FILES) == epoch  # one new file per append, read once

    read = []
    real = pyiceberg_arrow.ArrowScan.to_table
    monkeypatch.setattr(pyiceberg_arrow.ArrowScan, "to_table", lambda self, tasks: read.append(tasks) or real(self, tasks))
    size = [0]
    assert len(scan_arrow(table.scan(), read_bytes=size)) == 10 and read == []  # nothing new: no file read
    assert size == [0]  # and no byte counted
    filtered = table.scan(row_filter=EqualTo("state", "closed"))
    assert _sorted(scan_arrow(filtered)) == _sorted(filtered.to_arrow()) and len(filtered.to_arrow()) == 5

    table.overwrite(pa.table({"epoch": [9], "state": ["published"]}, schema=schema))
    table = catalog.load_table("ns.log")
    assert scan_arrow(table.scan(), read_bytes=size).to_pylist() == [{"epoch": 9, "state": "published"}]
    assert size == [sum(t.file.file_size_in_bytes for t in table.scan().plan_files())] and size[0] > 0
    assert len(rows_module._FILES) >= 6
