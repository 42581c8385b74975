"""The pipeline's configuration: schedules, landing layout, lateness, the Spark connection,
the catalog pool and maintenance retention. DAG files read it at parse time (schedules
must be known then), tasks at run time; nothing here touches Airflow or Spark.

Precedence, lowest first: the defaults below, the `[pipeline]` table of the home's
cumulus.toml, environment variables `CUMULUS_PIPELINE_<NAME>` (e.g.
`CUMULUS_PIPELINE_LATE_TIMEOUT=30s`). The home is `$CUMULUS_HOME` (set it in Airflow's
environment), else ./.cumulus, as for the CLI. Durations are `90s`, `10m`, `1h`, `1d`,
`1w` or a number of seconds.

    [pipeline]
    start = "2024-01-01T00:00:00+00:00"  # the first epoch's interval starts here
    epoch_interval = "1h"          # one cumulus_epoch run (one epoch) per interval
    first_epoch = 1                # the epoch of the first interval
    catchup = false                # true: a run per interval since `start`, epoch = interval
    microbatch_interval = "5m"     # cumulus_microbatch: ingest + apply this often
    late_timeout = "10m"           # how long a run waits for a source's files
    poke_interval = "30s"          # how often it looks
    landing_layout = "epoch-{epoch}"   # a source's folder of an epoch, under its landing
    ready_marker = "_SUCCESS"      # the file that says a folder is complete ("" = any file)
    spark_conn_id = "cumulus_spark"    # Airflow connection of spark-submit (optional)
    engine_wait = "15s"            # a task follows its step in the warm engine this long, then defers
    pool = "cumulus_catalog"       # Airflow pool of the tasks that commit (1 slot)
    retries = 2
    retry_delay = "20s"
    maintenance_interval = "1d"
    retain_last = 5                # snapshots kept per table beyond tagged ones
    retain_for = "7d"              # and every snapshot younger than this
    compact = true                 # rewrite small data files
    target_file_size_mb = 128
"""

from __future__ import annotations

import datetime as dt
import os
import re
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from cumulus.config import CONFIG_FILE, default_home, read_toml
from cumulus.errors import ConfigError

ENV_PREFIX = "CUMULUS_PIPELINE_"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")


@dataclass(frozen=True)
class PipelineConfig:
    start: dt.datetime = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    epoch_interval: dt.timedelta = dt.timedelta(hours=1)
    first_epoch: int = 1
    catchup: bool = False
    microbatch_interval: dt.timedelta = dt.timedelta(minutes=5)
    late_timeout: dt.timedelta = dt.timedelta(minutes=10)
    poke_interval: dt.timedelta = dt.timedelta(seconds=30)
    landing_layout: str = "epoch-{epoch}"
    ready_marker: str = "_SUCCESS"
    spark_conn_id: str = "cumulus_spark"
    engine_wait: dt.timedelta = dt.timedelta(seconds=15)
    pool: str = "cumulus_catalog"
    retries: int = 2
    retry_delay: dt.timedelta = dt.timedelta(seconds=20)
    maintenance_interval: dt.timedelta = dt.timedelta(days=1)
    retain_last: int = 5
    retain_for: dt.timedelta = dt.timedelta(days=7)
    compact: bool = True
    target_file_size_mb: int = 128

    def __post_init__(self) -> None:
        for name in ("epoch_interval", "microbatch_interval", "poke_interval", "maintenance_interval"):
            if getattr(self, name) <= dt.timedelta(0):
                raise ConfigError(f"[pipeline] {name} must be positive")
        if self.engine_wait < dt.timedelta(0):
            raise ConfigError("[pipeline] engine_wait must not be negative")
        if self.retries < 0 or self.retain_last < 1 or self.first_epoch < 1:
            raise ConfigError("[pipeline] retries >= 0, retain_last >= 1 and first_epoch >= 1 are required")
        try:
            self.landing_layout.format(**_layout_probe())
        except (KeyError, IndexError, ValueError) as exc:
            raise ConfigError(
                f"[pipeline] landing_layout {self.landing_layout!r}: {exc}; placeholders are "
                f"{', '.join('{' + k + '}' for k in _layout_probe())}"
            ) from None


def _layout_probe() -> dict[str, Any]:
    now = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    return {"epoch": 1, "start": now, "end": now, "ds": "2024-01-01", "ts_nodash": "20240101T000000"}


def parse_duration(value: Any, name: str = "duration") -> dt.timedelta:
    if isinstance(value, dt.timedelta):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return dt.timedelta(seconds=value)
    m = _DURATION.match(str(value))
    if not m:
        raise ConfigError(f"[pipeline] {name}: {value!r} is not a duration (e.g. 90s, 10m, 1h, 1d)")
    return dt.timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2) or "s"])


def _parse(name: str, kind: type, value: Any) -> Any:
    if kind is dt.timedelta:
        return parse_duration(value, name)
    if kind is dt.datetime:
        when = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value))
        return when if when.tzinfo else when.replace(tzinfo=dt.UTC)
    if kind is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text not in ("true", "false", "1", "0", "yes", "no"):
            raise ConfigError(f"[pipeline] {name}: {value!r} is not true or false")
        return text in ("true", "1", "yes")
    if kind is int:
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ConfigError(f"[pipeline] {name}: {value!r} is not an integer") from None
    return str(value)


_KINDS = {
    "start": dt.datetime, "epoch_interval": dt.timedelta, "first_epoch": int, "catchup": bool,
    "microbatch_interval": dt.timedelta, "late_timeout": dt.timedelta, "poke_interval": dt.timedelta,
    "landing_layout": str, "ready_marker": str, "spark_conn_id": str, "engine_wait": dt.timedelta,
    "pool": str, "retries": int,
    "retry_delay": dt.timedelta, "maintenance_interval": dt.timedelta, "retain_last": int,
    "retain_for": dt.timedelta, "compact": bool, "target_file_size_mb": int,
}
assert set(_KINDS) == {f.name for f in fields(PipelineConfig)}


def pipeline_home(home: str | os.PathLike[str] | None = None) -> Path:
    """The home the DAGs work on: `home`, else $CUMULUS_HOME, else ./.cumulus."""
    return Path(home).expanduser().resolve() if home else default_home().expanduser().resolve()


def load_pipeline_config(home: str | os.PathLike[str] | None = None, **overrides: Any) -> PipelineConfig:
    """The configuration for `home` (see the module doc). A home that does not exist yet
    gives the defaults, so DAG files parse on a fresh machine."""
    path = pipeline_home(home) / CONFIG_FILE
    table = read_toml(path).get("pipeline", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [pipeline] must be a table")
    values: dict[str, Any] = dict(table)
    for name in _KINDS:
        env = os.environ.get(ENV_PREFIX + name.upper())
        if env is not None and env != "":
            values[name] = env
    values.update({k: v for k, v in overrides.items() if v is not None})
    unknown = sorted(set(values) - set(_KINDS))
    if unknown:
        raise ConfigError(f"{path}: unknown [pipeline] setting(s) {', '.join(unknown)}; known: {', '.join(_KINDS)}")
    return PipelineConfig(**{name: _parse(name, _KINDS[name], v) for name, v in values.items()})


def with_changes(cfg: PipelineConfig, **changes: Any) -> PipelineConfig:
    return replace(cfg, **{k: _parse(k, _KINDS[k], v) for k, v in changes.items()})
