"""Issue 47 on a home: the issue's view over nullable columns is exact on the Spark apply
(apply_local_events = 0; the driver apply runs the interpreter, tested in the unit tier)
and on the Spark rebuild (a base over rebuild_local_rows);
maps written wrong (as an older compiler wrote them) are found by the full validation
(the oracle recomputes every view over base.*) and corrected by `epoch close --rebuild`,
which rebuilds every map from base.* at the close."""

from __future__ import annotations

import itertools
from decimal import Decimal

import pytest

from cumulus.app import Engine
from cumulus.config import load_settings, with_overrides
from cumulus.errors import ReadError, ViewError
from cumulus.ingest.sources import add_source
from cumulus.read import At, Reader
from cumulus.store.maps import PROGRAM, PROGRAM_SINCE
from cumulus.store.tables import Home, tables_of

DDL = ("CREATE TABLE sessions (session_id INT, user_id INT, device VARCHAR(10), started DATE, "
       "pages INT, revenue DECIMAL(12,2));\n")
VIEW = ("SELECT device, AVG(revenue - 1.25) AS avg_shifted, SUM(1 - pages) AS one_minus_pages "
        "FROM sessions GROUP BY device")
FIRST = "1|1|\\N|6|tab let|2019-12-31|5|\\N\n2|1|3|\\N|tab let|\\N|\\N|10.25\n"
SECOND = "3|0|\\N|6|tab let|2019-12-31|5|\\N\n4|1|7|\\N|tab let|\\N|2|\\N\n"
_homes = itertools.count(1)


def test_the_issue_view_on_spark_and_a_rebuild_corrects_wrong_maps(spark, tmp_path) -> None:
    root = tmp_path / "home"
    root.mkdir()
    (root / "cumulus.toml").write_text(f'catalog = "rebuild{next(_homes)}"\nspark_master = "local[2]"\npublish = "closed"\n')
    (tmp_path / "schema.sql").write_text(DDL)
    # rebuilds of at most 1 tuple in the driver: these go to Spark (test_full_refresh.py's in the driver)
    settings = with_overrides(load_settings(root), apply_local_events=0, rebuild_local_rows=1)
    engine = Engine(settings, spark=spark)
    from cumulus.store.home import init_home

    init_home(Home(spark, settings), tmp_path / "schema.sql")
    add_source(settings, "a", 1)
    engine.add_view("v", VIEW, "sql")
    reader = Reader(settings)
    rebuilt: dict[int, str] = {}  # epoch -> where its rebuild evaluated the deltas

    def epoch(n: int, text: str, **close) -> list[tuple]:
        landing = tmp_path / f"e{n}"
        landing.mkdir()
        (landing / "sessions.csv").write_text(text)
        engine.ingest("a", [str(landing)], "dbtoaster")
        engine.apply("a")
        _, metrics = engine.close(**close)
        if metrics["mode"] == "recompute":
            rebuilt[n] = metrics["recompute_evaluated"]
        return reader.read_view("v", At(n))

    assert epoch(1, FIRST) == [("tab let", 9.0, -4)]
    # An older compiler's wrong deltas (here: the entries of one map written twice).
    maps = tables_of(settings).maps
    spark.table(maps).where("map = 'v_avg_shifted'").writeTo(maps).append()
    wrong = epoch(2, SECOND)
    assert wrong != [("tab let", 10.25 - 1.25, 1 - 2)]
    outcome = engine.validate(2, full=True)
    assert outcome is not None and not outcome.passed, "the full validation must find the wrong view"
    got = epoch(3, "", rebuild_maps=True)
    assert got == [("tab let", float(Decimal("9.00")), -1)]
    assert rebuilt == {3: "by Spark"}
    outcome = engine.validate(3, full=True)
    assert outcome is not None and outcome.passed

    # A home whose maps an older Cumulus wrote (no program mark): applies leave their
    # batches to the close, reads refuse, and the close rebuilds every map from base.*.
    spark.sql(f"ALTER TABLE {maps} UNSET TBLPROPERTIES ('{PROGRAM}', '{PROGRAM_SINCE}')")
    landing = tmp_path / "e4"
    landing.mkdir()
    (landing / "sessions.csv").write_text("5|1|8|\\N|tab let|\\N|3|1.25\n")
    engine.ingest("a", [str(landing)], "dbtoaster")
    assert engine.apply("a").record is None
    with pytest.raises(ReadError, match="another version of Cumulus"):
        Reader(settings).read_view("v")
    _, metrics = engine.close()
    assert metrics["mode"] == "recompute" and "another version" in metrics["mode_reason"]
    assert metrics["recompute_evaluated"] == "by Spark"
    assert Reader(settings).read_view("v", At(4)) == [("tab let", float((Decimal("10.25") + Decimal("1.25")) / 2 - Decimal("1.25")), -1 + 1 - 3)]
    with pytest.raises(ReadError, match="read epoch 4 or later"):
        Reader(settings).read_view("v", At(3))
    rows = spark.sql(f"SELECT * FROM {settings.catalog}.views_stable.v").collect()
    assert [tuple(r) for r in rows] == [("tab let", 4.5, -3)]  # the catalog views recreated for the program

    # A view whose own map pairs every session with every session: its state, estimated from
    # base.* at the latest closed epoch, passes the bound; --force adds it anyway.
    pairs = ("SELECT a.session_id AS u, b.session_id AS w, COUNT(*) AS n FROM sessions a, sessions b "
             "GROUP BY a.session_id, b.session_id")
    engine = Engine(with_overrides(settings, max_entries_per_base_row=1.5), spark=spark)
    with pytest.raises(ViewError, match=r"the largest, pairs_count\[session_id, b_session_id\], about 9"):
        engine.add_view("pairs", pairs, "sql")
    engine.add_view("pairs", pairs, "sql", force=True)
    assert len(Reader(settings).read_view("pairs", At(4))) == 9
