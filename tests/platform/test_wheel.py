"""Cumulus installs like a package: the wheel built from this checkout, installed with
its declared dependencies (no extras) into a fresh virtual environment, runs from a
folder outside the checkout with no PYTHONPATH: `cumulus compile`, `cumulus interpret`
over a DBToaster stream, and a Spark epoch (init, a source, a view, ingest, apply, close,
a PyIceberg read of the stable view). The data files it needs (the GX suites) come from
the wheel itself. The machine's jars come from the checkout's cache (`make setup` builds
the relocated Jackson jar once per machine: docs/STACK.md)."""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
UV = shutil.which("uv")

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(UV is None, reason="uv builds and installs the wheel")]


def run(args: list, env: dict, cwd: Path, timeout: int = 600) -> str:
    done = subprocess.run([str(a) for a in args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(map(str, args))}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def test_the_wheel_installs_and_runs_an_epoch_outside_the_checkout(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CUMULUS_", "PYTHON", "VIRTUAL_ENV", "SPARK_HOME", "PYSPARK"))}
    env["CUMULUS_CACHE_DIR"] = str(REPO / ".cache")  # the relocated Jackson jar (`make setup`)
    env["CUMULUS_JVM_OPTIONS"] = os.environ["CUMULUS_JVM_OPTIONS"]  # the suite's quick JIT (tests/conftest.py)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"

    dist = tmp_path / "dist"
    run([UV, "build", "--quiet", "--out-dir", dist, REPO], env, tmp_path)  # sdist, then the wheel from it: no build/ here
    (wheel,) = dist.glob("cumulus-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "cumulus/jobs/close.py" in names and "cumulus/quality/suites/maps.yml" in names
    assert not [n for n in names if n.startswith(("tests/", "spark_jobs/", "web/"))]

    venv = tmp_path / "venv"
    run([UV, "venv", "--quiet", "--python", sys.executable, venv], env, tmp_path)
    python, cumulus = venv / "bin" / "python", venv / "bin" / "cumulus"
    # the declared dependencies, at the lock's versions (requirements.txt): from uv's cache
    # first, which setup filled (online, uv would build pyspark's sdist again: 30 s), then
    # online for what the cache lacks
    install = [UV, "pip", "install", "--quiet", "--python", python, wheel, "-c", REPO / "requirements.txt"]
    if subprocess.run([str(a) for a in [*install, "--offline"]], env=env, cwd=tmp_path, capture_output=True).returncode:
        run(install, env, tmp_path)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    work = tmp_path / "work"
    work.mkdir()
    where = run([python, "-c", "import cumulus, cumulus.quality.spec as s; print(cumulus.__file__); "
                 "print(s.expectations_dir()); import importlib.util as u; print(u.find_spec('airflow'))"], env, work)
    package, suites, airflow = where.splitlines()
    assert Path(package).is_relative_to(venv) and Path(suites).is_relative_to(venv) and airflow == "None"

    schema, view = SHARED / "examples" / "tpch_schema.sql", SHARED / "examples" / "tpch_revenue.sql"
    program = run([cumulus, "compile", "--schema", schema, view], env, work)
    assert "DECLARE MAP tpch_revenue" in program and "ON +LINEITEM(" in program
    rows = run([cumulus, "interpret", "--schema", schema, "--view", view,
                "--events", SHARED / "data" / "dbtoaster" / "tpch" / "tiny"], env, work)
    interpreted = list(csv.reader(io.StringIO(rows)))
    assert interpreted[0] == ["nation", "part", "revenue"] and len(interpreted) > 10

    # a Spark epoch through the installed package: its application layer in one process
    # (one JVM; each command would start its own), then its CLI's PyIceberg read
    home, stream = work / "home", work / "stream"
    env["CUMULUS_HOME"] = str(home)
    run([cumulus, "generate", "tpch", "--scale", "0.001", "--epochs", "1", "--out", stream], env, work)
    home.mkdir()  # no quality extra installed, so no validation: stable moves at the close
    (home / "cumulus.toml").write_text('publish = "closed"\n')
    epoch = f"""
from cumulus.app import Engine
engine, _ = Engine.init({str(home)!r}, {str(REPO / "demo" / "tpch_schema.sql")!r})
engine.add_source("catalog", 2, {str(stream / "catalog")!r})
engine.add_source("sales", 1, {str(stream / "sales")!r})
engine.add_view("revenue", open({str(REPO / "demo" / "views" / "revenue_by_nation_brand.sql")!r}).read(), "sql")
for source in ("catalog", "sales"):
    print(engine.ingest(source).headline())
    print(engine.apply(source).summary)
print("closed", engine.close())
"""
    out = run([python, "-c", epoch], env, work)
    assert "closed (1," in out, out
    status = run([cumulus, "epoch", "show", "1", "--format", "csv"], env, work)
    assert "closed" in status
    read = list(csv.reader(io.StringIO(run([cumulus, "read", "revenue", "--stable", "--format", "csv"], env, work))))
    assert len(read) > 1 and "revenue" in read[0]
    # the view's rows as a plain Iceberg table, through PyIceberg alone (the config file init wrote)
    plain = run([python, "-c", "import sys; from pyiceberg.catalog import load_catalog; "
                 "t = load_catalog('cumulus').load_table('results.revenue').scan().to_pandas(); "
                 "assert 'cumulus' not in sys.modules; print(len(t), ','.join(t.columns))"],
                {**env, "PYICEBERG_HOME": str(home)}, work)
    rows, columns = plain.split()
    assert int(rows) == len(read) - 1 and columns == ",".join(read[0])
