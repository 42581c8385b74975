"""scripts/demo_dag.py, the demo's progress bars over its `airflow dags test` runs: it
reads the lines Airflow 3 and dbt really print (copied from a demo run's logs, shortened)
into tasks done, the task at work, dbt's nodes and the run's outcome; a run's output,
replayed as scripts/airflow_runs.py prints it, reaches its log up to the runner's exit
line, and its end decides the outcome."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "demo_dag.py"
_spec = importlib.util.spec_from_file_location("demo_dag", SCRIPT)
demo_dag = importlib.util.module_from_spec(_spec)
sys.modules["demo_dag"] = demo_dag  # (its dataclass looks its module up)
_spec.loader.exec_module(demo_dag)

EPOCH_RUN = """\
2026-11-25T13:28:26.954364Z [info     ] [DAG TEST] starting task_id=epoch map_index=-1 [airflow.sdk.definitions.dag] loc=dag.py:1501
2026-11-25T13:28:37.986592Z [info     ] [DAG TEST] end task task_id=epoch map_index=-1 [airflow.sdk.definitions.dag] loc=dag.py:1563
2026-11-25T13:28:38.294938Z [info     ] [DAG TEST] starting task_id=source.wait map_index=0 [airflow.sdk.definitions.dag] loc=dag.py:1501
2026-11-25T13:28:38.467773Z [info     ] [DAG TEST] end task task_id=source.wait map_index=0 [airflow.sdk.definitions.dag] loc=dag.py:1563
2026-11-25T13:28:38.693096Z [info     ] [DAG TEST] starting task_id=source.ingest map_index=1 [airflow.sdk.definitions.dag] loc=dag.py:1501
2026-11-25T13:28:39.100000Z [info     ] epoch 2 source catalog: ingest: skipped (no untaken files) [airflow.task.operators.cumulus.pipeline.operators.CumulusSparkJob] loc=operators.py:128
2026-11-25T13:29:42.163709Z [info     ] [DAG TEST] starting task_id=close map_index=-1 [airflow.sdk.definitions.dag] loc=dag.py:1501
2026-11-25T13:29:59.870561Z [info     ] [DAG TEST] end task task_id=close map_index=-1 [airflow.sdk.definitions.dag] loc=dag.py:1563
2026-11-25T13:30:46.567362Z [info     ] DagRun Finished: dag_id=cumulus_epoch, logical_date=2024-01-02 00:00:00+00:00, run_duration=91459846.5, state=success, run_type=manual, data_interval_start=2024-01-01 00:00:00+00:00, [airflow.models.dagrun.DagRun] loc=dagrun.py:1315
"""

DBT_LINES = """\
2026-11-25T13:34:27.486396Z [info     ] \x1b[0m13:34:27  2 of 66 START test source_not_null_cumulus_ledger_epoch ........ [RUN] [cumulus.pipeline] loc=run.py:85
2026-11-25T13:34:38.707600Z [info     ] \x1b[0m13:34:38  5 of 66 OK created sql table model staging.stg_cumulus__order_priority_mix ..... [\x1b[32mOK\x1b[0m in 3.67s] [cumulus.pipeline] loc=run.py:85
"""


def test_the_lines_become_tasks_notes_and_an_outcome() -> None:
    state = demo_dag.RunState()
    events = [e for line in EPOCH_RUN.splitlines() if (e := state.feed(line))]
    assert events == [("task-end", "epoch"), ("task-end", "source.wait[0]"),
                      ("note", "epoch 2 source catalog: ingest: skipped (no untaken files)"), ("task-end", "close")]
    assert state.tasks_done == 3 and state.outcome == "success"
    assert state.progress(11) == (3, 11)


def test_the_task_at_work_then_dbt_nodes_take_over_the_bar() -> None:
    state = demo_dag.RunState()
    state.feed(EPOCH_RUN.splitlines()[4])
    assert state.current == "source.ingest[1]"
    for line in DBT_LINES.splitlines():
        state.feed(line)
    assert (state.dbt_done, state.dbt_total) == (5, 66) and state.progress(1) == (5, 66)
    assert state.current == "dbt: 5 of 66 nodes"


def test_the_runs_are_the_epochs_then_dbt_in_airflow_s_own_words() -> None:
    runs = demo_dag.demo_runs("2024-01-01T00:00:00+00:00", 2, 11)
    assert [r.command for r in runs] == [
        """dags test cumulus_epoch 2024-01-02T00:00:00+00:00 --conf '{"epoch": 1}'""",
        """dags test cumulus_epoch 2024-01-03T00:00:00+00:00 --conf '{"epoch": 2}'""",
        "dags test cumulus_dbt 2024-01-03T00:00:00+00:00",
    ]
    assert [(r.epoch, r.tasks, r.log) for r in runs] == [
        (1, 11, "cumulus_epoch-1.log"), (2, 11, "cumulus_epoch-2.log"), (None, None, "cumulus_dbt.log")]


def test_a_run_is_followed_up_to_its_exit_line_into_its_log(tmp_path, capsys) -> None:
    from rich.console import Console

    run = demo_dag.Run("dbt", "dags test cumulus_dbt 2024-01-02", "cumulus_dbt.log", tasks=1)
    failed = EPOCH_RUN.replace("state=success", "state=failed")
    lines = iter((EPOCH_RUN + "[airflow_runs] exit 0\n" + failed + "[airflow_runs] exit 1\n").splitlines(keepends=True))
    console = Console(file=sys.stdout)
    assert demo_dag.follow(run, lines, tmp_path / "one.log", console, [], None) == "success"
    assert (tmp_path / "one.log").read_text() == EPOCH_RUN  # every line, up to the runner's exit line
    assert "ingest: skipped (no untaken files)" in capsys.readouterr().out
    assert demo_dag.follow(run, lines, tmp_path / "two.log", console, [], None) == "failed"
    assert (tmp_path / "two.log").read_text() == failed
    assert demo_dag.follow(run, iter([]), tmp_path / "three.log", console, [], None) is None
