"""What a step cost in I/O: the bytes and rows its Spark stages read and wrote, summed
from the driver's status store (the data behind the Spark UI's stage table, kept even
when the UI is off). Steps of one process run one after another, so the stages that
completed between a meter's start and its reading are the step's own. Scan bytes are
what Iceberg actually read after partition and file pruning, which is what shows
whether an epoch's cost follows its events or the stored state."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class IO:
    bytes_read: int = 0
    rows_read: int = 0
    bytes_written: int = 0
    rows_written: int = 0
    stages: int = 0

    def __add__(self, other: IO) -> IO:
        return IO(*(a + b for a, b in zip(self.astuple(), other.astuple(), strict=True)))

    def astuple(self) -> tuple[int, ...]:
        return (self.bytes_read, self.rows_read, self.bytes_written, self.rows_written, self.stages)

    def as_metrics(self, prefix: str) -> dict[str, int]:
        return {f"{prefix}_{k}": v for k, v in asdict(self).items() if k != "stages"}


class StageMeter:
    """`meter = StageMeter(spark)` before a step; `meter.read()` after it. It looks at the
    jobs started since (job ids are consecutive), and their stages only (not every stage
    the application kept), so a long-lived session meters a step at the cost of the
    step's own stages. Arrays stay in the JVM (a py4j array costs a round trip per
    element, and the status store keeps up to a thousand jobs)."""

    def __init__(self, spark: SparkSession):
        self._spark = spark
        self._jvm = spark.sparkContext._jvm
        self._tracker = spark.sparkContext._jsc.statusTracker()
        self._start_job = self._last_job()
        self._start_stage = max(self._job_stages(self._start_job), default=-1)

    def _last_job(self) -> int:
        ids = self._tracker.getJobIdsForGroup(None)
        return int(self._jvm.java.util.Arrays.stream(ids).max().orElse(-1))

    def _job_stages(self, job: int) -> list[int]:
        info = self._tracker.getJobInfo(job) if job >= 0 else None
        if info is None:
            return []
        text = self._jvm.java.util.Arrays.toString(info.stageIds())  # "[3, 4]"
        return [int(s) for s in text.strip("[]").split(",") if s.strip()]

    def read(self) -> IO:
        from py4j.protocol import Py4JJavaError

        stage_ids: set[int] = set()
        for job in range(self._start_job + 1, self._last_job() + 1):
            stage_ids.update(s for s in self._job_stages(job) if s > self._start_stage)
        store = self._spark.sparkContext._jsc.sc().statusStore()
        total = IO()
        for sid in sorted(stage_ids):
            try:
                stage = store.lastStageAttempt(sid)
            except Py4JJavaError:  # a stage the job skipped (its output existed) has no attempt
                continue
            if stage.status().toString() == "COMPLETE":
                total = total + IO(
                    stage.inputBytes(), stage.inputRecords(), stage.outputBytes(), stage.outputRecords(), 1
                )
        return total


def committed_writes(spark: SparkSession, tables: list[str], marker: str, value: object) -> tuple[int, int]:
    """(bytes, rows) the commits of `tables` whose snapshot summary has `marker` = `value`
    added: data and delete files (`added-files-size`), rows and position deletes. Row-level
    (merge-on-read) writes report no task output metrics, so the close counts the writes of
    its MERGEs from their commits; reading table metadata only, no Spark job."""
    from cumulus.store.commit import snapshots

    nbytes = rows = 0
    for table in tables:
        for snap in snapshots(spark, table):
            if snap.summary.get(marker) == str(value):
                nbytes += int(snap.summary.get("added-files-size", 0))
                rows += int(snap.summary.get("added-records", 0)) + int(snap.summary.get("added-position-deletes", 0))
    return nbytes, rows


def human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


class StepMetrics:
    """Seconds and Spark I/O per step: `with steps("fold"): ...` adds fold_s,
    fold_bytes_read, fold_rows_read, fold_bytes_written, fold_rows_written."""

    def __init__(self, spark: SparkSession):
        self.spark = spark
        self.metrics: dict[str, float | int] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t, meter = time.perf_counter(), StageMeter(self.spark)
        yield
        self.metrics[f"{name}_s"] = round(time.perf_counter() - t, 3)
        self.metrics.update(meter.read().as_metrics(name))

    def writes_from_commits(self, name: str, tables: list[str], marker: str, epoch: int) -> None:
        """Replace the step's written bytes/rows by what its commits added (row-level writes
        do not report Spark output metrics)."""
        nbytes, rows = committed_writes(self.spark, tables, marker, epoch)
        self.metrics[f"{name}_bytes_written"], self.metrics[f"{name}_rows_written"] = nbytes, rows
