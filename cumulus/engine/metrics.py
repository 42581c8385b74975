"""What a step cost in I/O: the bytes and rows its Spark stages read and wrote, summed
from the driver's status store (the data behind the Spark UI's stage table, kept even
when the UI is off). Steps of one process run one after another, so the stages that
completed between a meter's start and its reading are the step's own. Scan bytes are
what Iceberg actually read after partition and file pruning, which is what shows
whether an epoch's cost follows its events or the stored state."""

from __future__ import annotations

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
    """`meter = StageMeter(spark)` before a step; `meter.read()` after it."""

    def __init__(self, spark: SparkSession):
        self._spark = spark
        self._start = max((sid for sid, _ in self._stages()), default=-1)

    def _stages(self):
        sc = self._spark.sparkContext
        jvm, gateway = sc._jvm, sc._gateway
        store = sc._jsc.sc().statusStore()
        seq = store.stageList(
            jvm.java.util.ArrayList(), False, False, gateway.new_array(jvm.double, 0), jvm.java.util.ArrayList()
        )
        for i in range(seq.size()):
            stage = seq.apply(i)
            yield stage.stageId(), stage

    def read(self) -> IO:
        total = IO()
        for sid, stage in self._stages():
            if sid > self._start and stage.status().toString() == "COMPLETE":
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
