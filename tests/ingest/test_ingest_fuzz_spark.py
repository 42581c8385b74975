"""Fuzzed landing files through the real Spark ingest (issue 13): hypothesis batches of
files in every format (tests/ingest/fuzzkit.py), with deletes of live and of absent
tuples, ingested by `ingest_files` into one home, then offered again with a copy of one
file under another name. After each batch: events.* hold exactly the valid rows, in seq
order, each once; the quarantine holds every bad row with its reason and line (deletes of
tuples with no live copy as not_alive, judged by a multiset kept here); the second offer
takes nothing. A file changed between its checksum and its parse refuses the batch.
The examples take the three ways in turn: in the driver (a small batch on a local master:
parsed, judged and written with no Spark job), in Spark's Python tasks
(ingest_local_bytes = 0, as on a cluster), and parsed in the driver but judged and
written by Spark (a batch whose deletes are too many to judge in the driver).

Few examples (each is two Spark ingests); replay as in test_ingest_fuzz.py
(print_blob, --hypothesis-seed; no example database). The home keeps its rows from one
example to the next, so a failure replayed may not fail again (hypothesis then reports a
FlakyFailure): the first exception it shows is the one to read.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import logging
import shutil
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from fuzzkit import (
    RELATIONS,
    SCHEMA,
    Expect,
    Fuzzed,
    any_file,
    dbtoaster_file,
    dumps,
    json_value,
    tuples,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ingestkit import SHOP, write_home

from cumulus.errors import IngestError
from cumulus.ingest import liveness
from cumulus.ingest.job import ingest_files
from cumulus.ingest.sources import add_source
from cumulus.store.tables import Home

_folders = itertools.count(1)


class Oracle:
    """What the home must hold: the live multiset per relation (commit order) and the
    checksums of the contents taken."""

    def __init__(self):
        self.alive = {rel.name: Counter() for rel in RELATIONS}
        self.taken: set[str] = set()


@pytest.fixture(scope="module")
def home(tmp_path_factory, spark):
    from cumulus.store.home import init_home

    settings_ = write_home(tmp_path_factory.mktemp("fuzzhome"), "ingfz")
    init_home(Home(spark, settings_), SHOP)
    add_source(settings_, "fz", 1, max_error_rate=1.0)
    return settings_, Oracle(), tmp_path_factory.mktemp("fuzzlanding")


@st.composite
def deletes_file(draw, alive: dict[str, Counter]):
    """`<rel>.jsonl` deletes: of live tuples (at least one when any lives; some more often
    than they live) and of at least one tuple with no live copy."""
    # The draws do not depend on the live tuples (hypothesis replays them): indices into
    # them, and tuples moved off a live key.
    rel = draw(st.sampled_from(RELATIONS))
    live = sorted((t for t, n in alive[rel.name].items() if n > 0), key=repr)
    picks = draw(st.lists(st.integers(0, 10**6), min_size=1, max_size=4))
    rows = [live[i % len(live)] for i in picks] if live else []
    for t in draw(st.lists(tuples(rel), min_size=1, max_size=2)):
        while alive[rel.name][t] > 0 or t in rows:
            t = ((t[0] + 1) % 2**62, *t[1:])
        rows.append(t)
    order = draw(st.lists(st.integers(0, 10**6), min_size=len(picks) + 2, max_size=len(picks) + 2))
    rows = [r for _, r in sorted(zip(order, rows, strict=False), key=lambda t: t[0])]  # order: 2 spare
    lines = [dumps({"op": "-", **{c.name: json_value(v, c) for v, c in zip(r, rel.columns, strict=True)}}) for r in rows]
    # Valid rows to the readers; whether each finds a live copy is expected_batch's call.
    expect = [Expect(i + 1, rel.name, -1, r) for i, r in enumerate(rows)]
    return Fuzzed(f"{rel.name}.jsonl", "".join(line + "\n" for line in lines).encode(), expect)


landing_groups = st.lists(
    st.one_of(any_file().map(lambda f: [f]), st.tuples(*[dbtoaster_file(r, events=True) for r in RELATIONS]).map(list)),
    min_size=1, max_size=3,
)


def expected_batch(groups, paths, oracle: Oracle):
    """The rows the batch must accept, in seq order, and its quarantine (path, line,
    reason): the files' expectations in unit order (a DBToaster event folder in stream
    order), deletes judged against the live multiset, duplicates of taken content none."""
    rank = {name: i for i, name in enumerate(SCHEMA.names)}
    accepted, quarantine, duplicates = [], Counter(), set()
    i = 0
    for group in groups:
        rows = []
        for index, fz in enumerate(group):
            path = paths[i]
            i += 1
            digest = hashlib.sha256(fz.data).hexdigest()
            if digest in oracle.taken:
                duplicates.add(path)
                continue
            oracle.taken.add(digest)
            for e in fz.expect:
                key = (fz.order.get(e.line, 0), rank.get(e.relation, len(rank)), index, e.line) if fz.order else (0, 0, index, e.line)
                rows.append((key, path, e))
        for _, path, e in sorted(rows, key=lambda t: t[0]):
            if e.reason is not None:
                quarantine[(path, e.line, e.reason)] += 1
                continue
            alive = oracle.alive[e.relation]
            if e.op < 0 and alive[e.values] <= 0:
                quarantine[(path, e.line, "not_alive")] += 1
                continue
            alive[e.values] += e.op
            accepted.append((e.relation, e.values, e.op))
    return accepted, quarantine, duplicates


def batch_rows(spark, settings_, batch_id: str):
    from pyspark.sql import functions as F

    events = []
    for rel in RELATIONS:
        df = spark.table(f"{settings_.catalog}.events.{rel.name}").where(F.col("batch_id") == batch_id)
        events += [(r["seq"], rel.name, tuple(r[c] for c in rel.column_names), r["op"]) for r in df.collect()]
    q = spark.table(f"{settings_.catalog}.cumulus.quarantine").where(F.col("batch_id") == batch_id).collect()
    return [e[1:] for e in sorted(events)], Counter((r["file"], r["line"], r["reason"]) for r in q)


def totals(spark, settings_) -> tuple[int, int]:
    events = sum(spark.table(f"{settings_.catalog}.events.{rel.name}").count() for rel in RELATIONS)
    return events, spark.table(f"{settings_.catalog}.cumulus.quarantine").count()


@settings(max_examples=4, deadline=None, database=None, print_blob=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzzed_batches_accept_every_valid_row_once_and_quarantine_every_bad_one(spark, home, data, caplog):
    settings_, oracle, landing = home
    caplog.set_level(logging.INFO, logger="cumulus.ingest")
    caplog.clear()
    number = next(_folders)
    way = number % 3  # 0: parsed by Spark's Python tasks; 1: in the driver; 2: parsed there, judged and written by Spark
    if way == 0:
        settings_ = dataclasses.replace(settings_, ingest_local_bytes=0)
    groups = data.draw(landing_groups, "groups")
    groups.append([data.draw(deletes_file(oracle.alive), "deletes")])
    folder = landing / f"b{number}"
    paths = [str(fz.write(folder / str(g)).resolve()) for g, group in enumerate(groups) for fz in group]

    want_rows, want_quarantine, duplicates = expected_batch(groups, paths, oracle)
    limit = liveness.DRIVER_LIMIT
    liveness.DRIVER_LIMIT = 0 if way == 2 else limit  # (any delete is then too many for the driver)
    try:
        report = ingest_files(Home(spark, settings_), "fz", paths)
    finally:
        liveness.DRIVER_LIMIT = limit
    said = [r.getMessage() for r in caplog.records]
    in_driver = any("in the driver" in line for line in said if "parsing" in line)
    assert in_driver == (way != 0) or report.accepted + report.rejected == 0, "the parse took the other path"
    if way == 2 and any(rel.deletes for rel in report.relations.values()):
        assert any("deletes too many to judge in the driver: by Spark" in line for line in said), said
    got_rows, got_quarantine = batch_rows(spark, settings_, report.batch_id)
    # Events in seq order, per relation as the oracle ordered them; each once.
    for rel in RELATIONS:
        assert [(v, op) for r, v, op in got_rows if r == rel.name] == [
            (v, op) for r, v, op in want_rows if r == rel.name
        ], f"events.{rel.name}"
    assert got_quarantine == want_quarantine
    assert (report.accepted, report.rejected) == (len(want_rows), sum(want_quarantine.values()))
    assert {e.path for e in report.files if e.status == "duplicate"} == duplicates

    # The same files again, and one under another name: nothing is taken twice.
    copy = Path(paths[0]).with_name("copy." + Path(paths[0]).name)
    shutil.copyfile(paths[0], copy)
    again = ingest_files(Home(spark, settings_), "fz", [*paths, str(copy)])
    assert again.accepted == 0 and again.rejected == 0
    assert set(again.already_taken) == set(paths) - duplicates
    assert {e.path for e in again.files if e.status == "duplicate"} == duplicates | {str(copy.resolve())}
    assert batch_rows(spark, settings_, again.batch_id) == ([], Counter())


def test_a_file_changed_while_being_read_refuses_the_batch(spark, home, monkeypatch):
    """The file is rewritten after its checksum (the after-plan fault point holds the
    job there): the batch writes nothing; offered again, the new content is taken once."""
    settings_, oracle, landing = home
    folder = Path(tempfile.mkdtemp(dir=landing))
    path = folder / "orders.csv"
    path.write_text("o_id,o_cust,o_total,o_date,o_note\n900001,1,1.00,2024-01-01,old\n")
    marker = folder / "_fired"
    monkeypatch.setenv("CUMULUS_FAULT", "after-plan:sleep:4")
    monkeypatch.setenv("CUMULUS_FAULT_FILE", str(marker))
    before = totals(spark, settings_)
    outcome: dict = {}

    def run():
        try:
            outcome["report"] = ingest_files(Home(spark, settings_), "fz", [path])
        except IngestError as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=run)
    worker.start()
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), "the after-plan fault point never fired"
    path.write_text("o_id,o_cust,o_total,o_date,o_note\n900002,2,2.00,2024-01-02,new\n900003,3,3.00,2024-01-03,new\n")
    worker.join(120)
    assert "error" in outcome, f"the batch went through: {outcome.get('report')}"
    message = str(outcome["error"])
    assert "changed while being read" in message and str(path) in message and "\n" not in message
    assert totals(spark, settings_) == before

    monkeypatch.delenv("CUMULUS_FAULT")
    report = ingest_files(Home(spark, settings_), "fz", [path])
    assert (report.accepted, report.rejected) == (2, 0)
    got, _ = batch_rows(spark, settings_, report.batch_id)
    assert sorted(v[0] for _, v, _ in got) == [900002, 900003]
    oracle.taken.add(hashlib.sha256(path.read_bytes()).hexdigest())
    for _, v, op in got:
        oracle.alive["orders"][v] += op


def test_a_delete_of_a_tuple_dated_before_year_1000(spark, home, tmp_path):
    """Found by the fuzzing: the delete check's IN lists sent dates to the JVM through
    strftime, which writes year 322 as "322"; the ingest ended in IllegalArgumentException.
    (o_cust and o_total NULL, so o_date is a lookup column.)"""
    settings_, oracle, _ = home
    row = '"o_id": 900100, "o_cust": null, "o_total": null, "o_date": "0322-04-30", "o_note": "x"'
    path = tmp_path / "orders.jsonl"
    path.write_text(f'{{"op": "+", {row}}}\n{{"op": "-", {row}}}\n{{"op": "-", {row}}}\n')
    report = ingest_files(Home(spark, settings_), "fz", [path])
    got, quarantine = batch_rows(spark, settings_, report.batch_id)
    assert [op for _, _, op in got] == [1, -1]
    assert quarantine == Counter({(str(path), 3, "not_alive"): 1})
    oracle.taken.add(hashlib.sha256(path.read_bytes()).hexdigest())
