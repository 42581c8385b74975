"""The vectorized fast path gives exactly what the row-by-row readers give, or declines
(pure Python + Arrow, no JVM)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from ingestkit import SHOP, TPCH, write

from cumulus.ingest import fastpath
from cumulus.ingest.fastpath import CHUNK_BYTES, Leave, fast_segments
from cumulus.ingest.formats import codecs
from cumulus.ingest.parse import arrow_schema, to_batch, unit_batches, unit_records
from cumulus.ingest.plan import make_units, plan_files
from cumulus.schema import load_schema

TPCHGEN = Path(sys.executable).parent / "tpchgen-cli"


def both(paths, schema, chunk_bytes: int = CHUNK_BYTES):
    """Per unit: (what the fast path made of each chunk, None where it declines the whole
    file; the unit's records through the parse stage, fast path first; the row path's).
    Kinds: "fast" (a batch it converted), "part" (a chunk it left to the row path),
    "rest" (the rest of the file left to the row path)."""
    cm = codecs(schema)
    _, units = make_units(plan_files([Path(p) for p in paths], None, None, schema))
    out = []
    for unit in units:
        relation = schema.relation(unit.files[0].relation)
        target = arrow_schema(relation)
        segments = fast_segments(unit, cm[relation.name], target, chunk_bytes)
        kinds = None if segments is None else [
            "fast" if not isinstance(s, Leave) else ("rest" if s.part is None else "part") for s in segments
        ]
        parsed = pa.Table.from_batches(list(unit_batches(unit, schema, cm, relation.name, target, chunk_bytes)), schema=target)
        slow = pa.Table.from_batches([to_batch(unit.index, list(unit_records(unit, schema, cm)), relation, target)])
        out.append((kinds, parsed, slow))
    return out


@pytest.mark.parametrize("kind", ["tbl", "csv", "parquet"])
def test_tpchgen_files_take_the_fast_path_with_the_same_result(tmp_path, kind):
    subprocess.run(
        [str(TPCHGEN), *([] if kind == "tbl" else [kind]), "-s", "0.001", "--parts", "2", "-o", str(tmp_path)],
        check=True, capture_output=True,
    )
    pairs = both([tmp_path], load_schema(TPCH))
    assert len(pairs) == 14
    for kinds, parsed, slow in pairs:
        assert kinds and set(kinds) == {"fast"} and parsed.equals(slow)


def test_edge_values_are_read_alike(tmp_path):
    schema = load_schema(SHOP)
    write(
        tmp_path / "orders.csv",
        "o_note,op,o_id,o_cust,o_total,o_date\n"
        '"quoted, with comma",+,1,\\N,-0.5,2024-02-29\n'
        ',insert,2,,1e1,\n'
        '"",1,3,-7,.25,2024-01-01\n',
    )
    write(tmp_path / "items.tbl", "1|2|0.1|true|\n2|\\N|1e-3|0|\n3||-2|FALSE|\n")
    pq.write_table(
        pa.table({"i_order": pa.array([1, 2], pa.int32()), "i_qty": [None, 3], "i_price": [1.5, None], "i_gift": [True, None]}),
        tmp_path / "items.parquet",
    )
    pairs = both([tmp_path], schema)
    assert len(pairs) == 3
    for kinds, parsed, slow in pairs:
        assert kinds and set(kinds) == {"fast"} and parsed.equals(slow)


@pytest.mark.parametrize(
    "text",
    [
        "o_id,o_cust,o_total,o_date,o_note\n1,2,3,2024-01-01,a\n\n2,2,3,2024-01-01,b\n",  # blank line
        "op,o_id,o_cust,o_total,o_date,o_note\n-,1,2,3,2024-01-01,a\n",  # a delete
        'o_id,o_cust,o_total,o_date,o_note\n1,2,3,2024-01-01,"\\N"\n',  # quoted \N
        "o_id,o_cust,o_total,o_date,o_note\n1, 2,3,2024-01-01,a\n",  # int with a space
        "o_id,o_cust,o_total,o_date,o_note\n1,2,3.001,2024-01-01,a\n",  # would round
        "o_id,o_cust,o_total,o_date,o_note\n\\N,2,3,2024-01-01,a\n",  # NOT NULL
        "o_id,o_cust,o_total,o_date,o_note\n1,2,3,20240101,a\n",  # date form
        "o_id,o_cust,o_total,o_note\n1,2,3,a\n",  # header
    ],
)
def test_the_fast_path_declines_what_only_the_row_path_may_judge(tmp_path, text):
    write(tmp_path / "orders.csv", text)
    [(kinds, parsed, slow)] = both([tmp_path], load_schema(SHOP))
    assert kinds is None or "fast" not in kinds
    assert parsed.equals(slow)


ROW = "{i},{c},{t},2024-01-{d:02d},note {i}\n"


def _rows(first: int, n: int) -> str:
    return "".join(ROW.format(i=i, c=i % 7, t=i % 100, d=1 + i % 28) for i in range(first, first + n))


def test_a_large_file_streams_in_chunks_and_only_the_doubtful_ones_take_the_row_path(tmp_path):
    """Chunks of a few rows (as 64 MiB chunks of a file of many GB): a chunk with a delete
    or a value in doubt goes row by row and the next chunks are fast again; after a blank
    line (positions would no longer be line numbers) the rest of the file goes row by row;
    the records, their positions and line numbers are the row path's throughout."""
    text = (
        "o_id,o_cust,o_total,o_date,o_note,op\n" + _rows(0, 40).replace("\n", ",+\n")
        + "40,1,2,2024-01-01,x,-\n" + _rows(41, 30).replace("\n", ",+\n")
        + '71,1,2,2024-01-01,"\\N",+\n' + _rows(72, 30).replace("\n", ",+\n")
        + "\n" + _rows(102, 20).replace("\n", ",+\n")
    )
    write(tmp_path / "orders.csv", text)
    [(kinds, parsed, slow)] = both([tmp_path], load_schema(SHOP), chunk_bytes=400)
    assert kinds.count("part") == 2 and kinds[-1] == "rest" and kinds.count("fast") >= 4, kinds
    assert kinds.index("part") > 0 and "fast" in kinds[kinds.index("part") + 1:], kinds
    assert parsed.equals(slow) and parsed.num_rows == 122


def test_a_large_static_file_and_a_parquet_file_stream_alike(tmp_path, monkeypatch):
    write(tmp_path / "items.tbl", "".join(f"{i}|{i % 5}|{i}.5|{'true' if i % 2 else '0'}|\n" for i in range(200))
          + "200|1|x|true|\n" + "".join(f"{i}|2|1|0|\n" for i in range(201, 260)))
    pq.write_table(
        pa.table({"i_order": pa.array(range(300), pa.int32()), "i_qty": [i % 9 for i in range(300)],
                  "i_price": [i / 4 for i in range(300)], "i_gift": [i % 3 == 0 for i in range(300)],
                  "op": ["+"] * 150 + ["-"] + ["+"] * 149}),
        tmp_path / "items.parquet",
    )
    monkeypatch.setattr(fastpath, "PARQUET_ROWS", 64)
    pairs = both([tmp_path], load_schema(SHOP), chunk_bytes=300)
    assert len(pairs) == 2
    for kinds, parsed, slow in pairs:
        assert kinds.count("part") == 1 and kinds.count("fast") >= 3 and "rest" not in kinds, kinds
        assert parsed.equals(slow)
