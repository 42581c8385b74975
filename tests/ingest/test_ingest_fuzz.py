"""Fuzzed landing files through the parse stage (issue 13), JVM-free: hypothesis writes
files of every format with good rows and rows with one defect each (tests/ingest/
fuzzkit.py), plans them as the job does (plan_files, make_units) and runs every unit
through `unit_batches`, the function the Spark parse tasks run (fast path and row
readers). Property: every line comes out exactly once, a valid row with its typed tuple
and op, a bad one with the reason its defect calls for, a detail and its raw text; rows
are numbered in file order (DBToaster folders: event order, relation, file, line); and
nothing raises.

Replay: hypothesis prints the failing example and a `@reproduce_failure` blob
(print_blob); `pytest --hypothesis-seed=N` reruns a seed. No example database is kept
(database=None), so runs leave nothing in the tree.
"""

from __future__ import annotations

import datetime as dt
import io
import tempfile
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from fuzzkit import (
    RELATIONS,
    SCHEMA,
    Expect,
    Fuzzed,
    csv_file,
    dbtoaster_file,
    jsonl_file,
    parquet_file,
)
from fuzzkit import any_file as any_file_strategy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cumulus.ingest.fastpath import CHUNK_BYTES
from cumulus.ingest.formats import codecs
from cumulus.ingest.parse import arrow_schema, unit_batches, units_for
from cumulus.ingest.plan import make_units, plan_files

CODECS = codecs(SCHEMA)
FUZZ = settings(max_examples=60, deadline=None, database=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@st.composite
def dbtoaster_folder(draw):
    """Event files of both relations in one folder (one unit), maybe with static files."""
    files = [draw(dbtoaster_file(rel, events=True)) for rel in RELATIONS]
    files += [draw(dbtoaster_file(rel, events=False)) for rel in RELATIONS if draw(st.booleans())]
    return files


landing = st.lists(st.one_of(any_file_strategy().map(lambda f: [f]), dbtoaster_folder()), min_size=1, max_size=4)


def parse(groups, folder: Path, chunk_bytes: int):
    """Write the files (a folder per group), plan them and parse every unit for every
    relation and for no relation, as the job's passes do. Returns the planned files,
    the units, the records as dicts and the expectations by (file index, line)."""
    paths, expected, orders = [], {}, {}
    for g, group in enumerate(groups):
        for fz in group:
            path = fz.write(folder / str(g)).resolve()
            paths.append(path)
            expected[str(path)] = fz
    files, units = make_units(plan_files(paths, None, None, SCHEMA))
    records = []
    for name in [*SCHEMA.names, None]:
        target = arrow_schema(SCHEMA.relation(name) if name else None)
        for unit in units_for(units, name):
            for batch in unit_batches(unit, SCHEMA, CODECS, name, target, chunk_bytes):
                records += batch.to_pylist()
    want = {}
    for f in files:
        fz = expected[f.path]
        for e in fz.expect:
            want[(f.index, e.line)] = e
        orders.update({(f.index, line): o for line, o in fz.order.items()})
    return files, units, records, want, orders


def check(files, units, records, want, orders) -> None:
    got = Counter((r["__file"], r["__line"]) for r in records)
    twice = [k for k, n in got.items() if n > 1]
    assert not twice, f"lines read more than once: {twice}"
    assert set(got) == set(want), (
        f"lines missing: {sorted(set(want) - set(got))}; lines not expected: {sorted(set(got) - set(want))}"
    )
    for r in records:
        e = want[(r["__file"], r["__line"])]
        where = f"{files[r['__file']].path}:{e.line}"
        if e.reason is None:
            assert r["__reason"] is None, f"{where}: rejected ({r['__reason']}: {r['__detail']}), expected valid"
            rel = SCHEMA.relation(e.relation)
            values = tuple(r[c] for c in rel.column_names)
            assert (r["__relation"], r["__op"], values) == (e.relation, e.op, e.values), where
        else:
            assert r["__reason"] == e.reason, f"{where}: {r['__reason']} ({r['__detail']}), expected {e.reason}"
            assert r["__detail"], where
            assert r["__raw"] is not None or e.line == 0, where
    # Positions: distinct in a unit, in file order (DBToaster folders: stream order).
    rank = {name: i for i, name in enumerate(SCHEMA.names)}
    for unit in units:
        mine = sorted((r for r in records if r["__unit"] == unit.index), key=lambda r: r["__pos"])
        assert len({r["__pos"] for r in mine}) == len(mine)
        if unit.interleave:
            keys = [(orders[(r["__file"], r["__line"])], rank.get(files[r["__file"]].relation, len(rank)),
                     r["__file"], r["__line"]) for r in mine]
        else:
            keys = [(r["__file"], r["__line"]) for r in mine]
        assert keys == sorted(keys), f"unit {unit.index}: rows out of order"


@settings(FUZZ, max_examples=100)
@given(landing, st.sampled_from([97, 4096, CHUNK_BYTES]))
def test_every_line_once_valid_rows_typed_bad_rows_with_their_reason(groups, chunk_bytes):
    with tempfile.TemporaryDirectory(prefix="cumulus-fuzz-") as tmp:
        check(*parse(groups, Path(tmp), chunk_bytes))


# One format at a time too, so each gets its share of examples.
@FUZZ
@given(st.sampled_from(RELATIONS).flatmap(csv_file), st.sampled_from([97, CHUNK_BYTES]))
def test_csv(fz, chunk_bytes):
    with tempfile.TemporaryDirectory(prefix="cumulus-fuzz-") as tmp:
        check(*parse([[fz]], Path(tmp), chunk_bytes))


@FUZZ
@given(st.sampled_from(RELATIONS).flatmap(lambda rel: dbtoaster_file(rel, events=False)), st.sampled_from([97, CHUNK_BYTES]))
def test_dbtoaster_static(fz, chunk_bytes):
    with tempfile.TemporaryDirectory(prefix="cumulus-fuzz-") as tmp:
        check(*parse([[fz]], Path(tmp), chunk_bytes))


@FUZZ
@given(dbtoaster_folder())
def test_dbtoaster_events(files):
    with tempfile.TemporaryDirectory(prefix="cumulus-fuzz-") as tmp:
        check(*parse([files], Path(tmp), CHUNK_BYTES))


@FUZZ
@given(jsonl_file())
def test_jsonl(fz):
    with tempfile.TemporaryDirectory(prefix="cumulus-fuzz-") as tmp:
        check(*parse([[fz]], Path(tmp), CHUNK_BYTES))


@FUZZ
@given(st.sampled_from(RELATIONS).flatmap(parquet_file))
def test_parquet(fz):
    with tempfile.TemporaryDirectory(prefix="cumulus-fuzz-") as tmp:
        check(*parse([[fz]], Path(tmp), CHUNK_BYTES))


def test_fast_path_leaves_dates_python_cannot_hold():
    """Found by the fuzzing: Arrow reads "0000-01-01" and date32 days past 9999-12-31, so
    a chunk of otherwise clean rows took them into events; the row readers reject them
    (bad_value), and the fast path now leaves such chunks to them."""
    header = b"o_id,o_cust,o_total,o_date,o_note\n"
    good = b"1,2,3.50,2024-01-01,a\n"
    text = Fuzzed("orders.csv", header + good + b"2,2,3.50,0000-01-01,b\n", [
        Expect(2, "orders", 1, (1, 2, Decimal("3.50"), dt.date(2024, 1, 1), "a")),
        Expect(3, "orders", reason="bad_value"),
    ])
    buf = io.BytesIO()
    pq.write_table(pa.table({
        "o_id": pa.array([1, 2], pa.int64()), "o_cust": pa.array([None, None], pa.int64()),
        "o_total": pa.array([None, None], pa.decimal128(10, 2)),
        "o_date": pa.array([0, 2932897], pa.int32()).cast(pa.date32()), "o_note": ["a", "b"],
    }), buf)
    parquet = Fuzzed("orders.parquet", buf.getvalue(), [
        Expect(1, "orders", 1, (1, None, None, dt.date(1970, 1, 1), "a")),
        Expect(2, "orders", reason="bad_value"),
    ])
    with tempfile.TemporaryDirectory(prefix="cumulus-fuzz-") as tmp:
        check(*parse([[text], [parquet]], Path(tmp), CHUNK_BYTES))
