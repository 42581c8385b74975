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

from cumulus.ingest.fastpath import fast_batches
from cumulus.ingest.formats import codecs
from cumulus.ingest.parse import arrow_schema, to_batch, unit_records
from cumulus.ingest.plan import make_units, plan_files
from cumulus.schema import load_schema

TPCHGEN = Path(sys.executable).parent / "tpchgen-cli"


def both(paths, schema):
    """(fast, slow) tables per unit; fast is None where the fast path declines."""
    cm = codecs(schema)
    _, units = make_units(plan_files([Path(p) for p in paths], None, None, schema))
    out = []
    for unit in units:
        relation = schema.relation(unit.files[0].relation)
        target = arrow_schema(relation)
        fast = fast_batches(unit, cm[relation.name], target)
        slow = pa.Table.from_batches([to_batch(unit.index, list(unit_records(unit, schema, cm)), relation, target)])
        out.append((None if fast is None else pa.Table.from_batches(fast, schema=target), slow))
    return out


@pytest.mark.parametrize("kind", ["tbl", "csv", "parquet"])
def test_tpchgen_files_take_the_fast_path_with_the_same_result(tmp_path, kind):
    subprocess.run(
        [str(TPCHGEN), *([] if kind == "tbl" else [kind]), "-s", "0.001", "--parts", "2", "-o", str(tmp_path)],
        check=True, capture_output=True,
    )
    pairs = both([tmp_path], load_schema(TPCH))
    assert len(pairs) == 14
    for fast, slow in pairs:
        assert fast is not None and fast.equals(slow)


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
    for fast, slow in pairs:
        assert fast is not None and fast.equals(slow)


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
    [(fast, _)] = both([tmp_path], load_schema(SHOP))
    assert fast is None
