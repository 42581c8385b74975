"""Settings in one place: the Cumulus home, the Iceberg catalog and the Spark master.

Precedence, lowest first: built-in defaults, `<home>/cumulus.toml`, environment variables
(CUMULUS_*), explicit arguments (the CLI's --home). The home itself comes from --home,
else $CUMULUS_HOME, else ./.cumulus.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from cumulus.errors import ConfigError, NotAHomeError

CONFIG_FILE = "cumulus.toml"
HOME_MARKER = "schema.sql"  # written first by `cumulus init`: a folder with it is a home

# Tables of cumulus.toml that are not plain Settings fields: [sources.NAME] and [ingest]
# (read by cumulus/ingest/sources.py, since `cumulus source add` rewrites them) and
# [pipeline] (Settings.pipeline, below: Airflow schedules, landing layout, maintenance).
SECTIONS = ("sources", "ingest", "pipeline")

# Setting name -> environment variable that overrides it.
ENV_VARS = {
    "catalog": "CUMULUS_CATALOG",
    "spark_master": "CUMULUS_SPARK_MASTER",
    "catalog_uri": "CUMULUS_CATALOG_URI",
    "catalog_user": "CUMULUS_CATALOG_USER",
    "catalog_password": "CUMULUS_CATALOG_PASSWORD",
    "warehouse": "CUMULUS_WAREHOUSE",
}


EPOCH_MODES = ("auto", "incremental", "recompute")
PUBLISH_MODES = ("validated", "closed")
# The dialects a view's SQL may be written in (`sql_dialect`): Spark's by default, as
# every other SQL a user writes here (Spark SQL, dbt, the Thrift server), so a view that
# runs in Spark SQL is accepted as written (in Spark "x" is a string, `x` a name);
# DuckDB's is the other one tested (the tests' oracle runs views in DuckDB, transpiled).
SQL_DIALECTS = ("spark", "duckdb")
DEFAULT_DIALECT = "spark"


# The pipeline's configuration: schedules, landing layout, lateness, the Spark connection,
# the catalog pool and maintenance retention. DAG files read it at parse time (schedules
# must be known then), tasks at run time; nothing here touches Airflow or Spark.
#
# Precedence, lowest first: the defaults below, the `[pipeline]` table of the home's
# cumulus.toml, environment variables `CUMULUS_PIPELINE_<NAME>` (e.g.
# `CUMULUS_PIPELINE_LATE_TIMEOUT=30s`). The home is `$CUMULUS_HOME` (set it in Airflow's
# environment), else ./.cumulus, as for the CLI. Durations are `90s`, `10m`, `1h`, `1d`,
# `1w` or a number of seconds.
#
#     [pipeline]
#     start = "2024-01-01T00:00:00+00:00"  # the first epoch's interval starts here
#     epoch_interval = "1h"          # one cumulus_epoch run (one epoch) per interval
#     first_epoch = 1                # the epoch of the first interval
#     catchup = false                # true: a run per interval since `start`, epoch = interval
#     microbatch_interval = "5m"     # cumulus_microbatch: ingest + apply this often
#     late_timeout = "10m"           # how long a run waits for a source's files
#     poke_interval = "30s"          # how often it looks
#     landing_layout = "epoch-{epoch}"   # a source's folder of an epoch, under its landing
#     ready_marker = "_SUCCESS"      # the file that says a folder is complete ("" = any file)
#     spark_conn_id = "cumulus_spark"    # Airflow connection of spark-submit (optional)
#     engine_wait = "15s"            # a task follows its step in the warm engine this long, then defers
#     pool = "cumulus_catalog"       # Airflow pool of the tasks that commit (1 slot)
#     retries = 2
#     retry_delay = "20s"
#     maintenance_interval = "1d"
#     retain_last = 5                # snapshots kept per table beyond tagged ones
#     retain_for = "7d"              # and every snapshot younger than this
#     compact = true                 # rewrite small data files
#     target_file_size_mb = 128
#     min_input_files = 5            # data files a table needs before they are rewritten

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
    min_input_files: int = 5  # Iceberg's rewrite_data_files default: fewer files are left alone

    def __post_init__(self) -> None:
        for name in ("epoch_interval", "microbatch_interval", "poke_interval", "maintenance_interval"):
            if getattr(self, name) <= dt.timedelta(0):
                raise ConfigError(f"[pipeline] {name} must be positive")
        if self.engine_wait < dt.timedelta(0):
            raise ConfigError("[pipeline] engine_wait must not be negative")
        if self.retries < 0 or self.retain_last < 1 or self.first_epoch < 1 or self.min_input_files < 1:
            raise ConfigError("[pipeline] retries >= 0, retain_last >= 1, first_epoch >= 1 and min_input_files >= 1 "
                              "are required")
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
    "retain_for": dt.timedelta, "compact": bool, "target_file_size_mb": int, "min_input_files": int,
}
assert set(_KINDS) == {f.name for f in fields(PipelineConfig)}


def pipeline_home(home: str | os.PathLike[str] | None = None) -> Path:
    """The home the DAGs work on: `home`, else $CUMULUS_HOME, else ./.cumulus."""
    return Path(home).expanduser().resolve() if home else default_home().expanduser().resolve()


def load_pipeline_config(home: str | os.PathLike[str] | None = None, **overrides: Any) -> PipelineConfig:
    """The [pipeline] settings of `home` alone (load_settings(home).pipeline reads them with
    the rest). A home that does not exist yet gives the defaults, so DAG files parse on a
    fresh machine."""
    path = pipeline_home(home) / CONFIG_FILE
    return pipeline_config(read_toml(path).get("pipeline", {}), path, **overrides)


def pipeline_config(table: Any, path: Path, **overrides: Any) -> PipelineConfig:
    """PipelineConfig from a [pipeline] table, the environment and `overrides`."""
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


@dataclass(frozen=True)
class Settings:
    """Where Cumulus keeps its state and how it reaches Spark and the catalog.

    `catalog_uri` is a JDBC uri: SQLite in the home by default (embedded mode), or
    `jdbc:postgresql://host:port/db` (with catalog_user / catalog_password) where several
    processes must commit at once. `spark_conf` holds extra Spark settings (the [spark]
    table of cumulus.toml); they are applied last, so they can override anything.
    """

    home: Path
    catalog: str = "cumulus"
    spark_master: str = "local[*]"
    catalog_uri: str = ""
    catalog_user: str = ""
    catalog_password: str = field(default="", repr=False)
    warehouse: Path | None = None
    spark_ui: bool = False
    shuffle_partitions: int = 4
    # Tables written at once by one step (map appends, compactions, tags, folds): each
    # is a small Spark job plus a catalog commit, mostly latency, so threads overlap them.
    table_workers: int = 4
    # base.<rel> gets each fold as an appended layer and is rewritten compact once its
    # layers exceed this share of its compacted rows (cumulus/store/fold.py).
    base_compaction_ratio: float = 0.1
    # maps.<map> get each batch's deltas as appended rows, summed by every reader; a close
    # rewrites a map as one row per entry once the delta rows of closed epochs appended
    # since its last compaction exceed this share of the rows it left, and the minimum
    # (a small map is cheap to read as it is) (cumulus/store/maps.py).
    map_compaction_ratio: float = 1.0
    map_compaction_min_rows: int = 10_000
    # Validation of a closed epoch checks the map entries and base tuples the epoch
    # touched; every this many epochs (epoch 1, 1 + K, ...) and on demand (validate
    # --full) it checks every entry and tuple and runs the oracle, which recomputes every
    # view: as costly as what Cumulus replaces (cumulus/quality/validate.py).
    full_validation_every: int = 10
    # A suite's stacked frame (cumulus/quality/frames.py) of at most this many rows is
    # validated by GX's pandas engine, after one collect; a larger one by its Spark engine,
    # which pays several Spark jobs per expectation whatever the rows.
    validation_local_rows: int = 200_000
    # An ingest batch whose new files total at most this many bytes is parsed in the
    # driver on a local master (no Python worker, no parse job); a larger one, or any on a
    # cluster, by Spark's Python tasks (cumulus/ingest/parse.py). 0: always by the tasks.
    ingest_local_bytes: int = 4 << 20
    # An apply's batch of at most this many events, whose maps read hold at most
    # `apply_local_rows` rows, is evaluated in the driver by the reference interpreter
    # (cumulus/engine/driver_apply.py); a larger one by a Spark plan. 0: always Spark.
    apply_local_events: int = 5_000
    apply_local_rows: int = 200_000
    # A rebuild or back-fill from base.* whose relations hold at most this many tuples is
    # evaluated in the driver by the reference interpreter (driver_apply.driver_rebuild);
    # a larger one by Spark plans. 0: always Spark.
    rebuild_local_rows: int = 20_000
    # `view add` refuses a view whose maps would hold more entries than this per row of the
    # relations it reads, estimated from base.* at the latest closed epoch
    # (cumulus/sql/estimate.py), unless it is forced (`view add --force`). 0: no bound.
    max_entries_per_base_row: float = 10.0
    # A view whose SQL has no incremental form here is kept by full refresh (recomputed by
    # Spark SQL over base.* at each close: cumulus/engine/refresh.py) under "allow"; under
    # "refuse", `view add` refuses it with the construct that blocks it.
    full_refresh: str = "allow"
    # When an epoch becomes the stable snapshot (the `stable` branch, views_stable.*, the
    # read API's --stable): "validated" (write-audit-publish) once it passed validation and
    # every epoch before it is published (a failed one holds the later ones until
    # `cumulus epoch publish N --accept-failed`); "closed" at its close, for a home that
    # does not validate (cumulus/engine/publish.py).
    publish: str = "validated"
    # At each publish every view's rows are written to the Iceberg table results.<view>,
    # tagged epoch-N, for readers with no Cumulus code (PyIceberg, DuckDB, Trino).
    results_tables: bool = True
    # A results table is updated by the groups an epoch touched while they are at most this
    # share of its view's groups (one the driver writes), or of its rows when it has at
    # least that many (one a MERGE updates); else it is rewritten whole
    # (cumulus/engine/results.py; bench/results/publish*.md measures both ways).
    results_touched_share: float = 0.25
    results_touched_min_rows: int = 50_000
    # A table rewritten whole whose view's maps hold at most this many rows is written from
    # the driver through PyIceberg, with no Spark job (0: always through Spark). The maps of
    # values of a MIN or MAX without GROUP BY are not counted: Arrow cuts them to their
    # extremes before the driver's Python reads them (results_driver_touched_rows bounds them).
    results_driver_rows: int = 100_000
    # Any other table (without a MERGE's delete files) that holds at most this many rows is
    # written from the driver too: its touched groups' rows, made by the driver from their
    # maps' entries, in place of theirs, or rewritten whole with the rows Spark's query
    # gives, collected as Arrow (0: Spark writes it).
    # Each such write is a copy of the table, which its epoch-N tag keeps: above this, a
    # touched update is a row delta (a position delete file and the groups' new rows, from
    # the driver) or a MERGE, whose files follow the touched groups.
    results_collect_rows: int = 200_000
    # The driver updates a table by its touched groups (their rows made from the maps'
    # entries of those groups: a copy or a row delta, above) while its view's maps hold at
    # most this many rows at the tag, and rewrites one whole from its own rows only then:
    # it reads each map's files whole (Arrow: 0.1 s for 1.5 million rows). Above, a MERGE
    # (a row per group) or Spark's whole query.
    results_driver_touched_rows: int = 10_000_000
    # How a close brings the maps to the epoch's state when batches are still pending:
    # "incremental" applies them, "recompute" rebuilds every map from base.*, "auto"
    # picks the cheaper from the costs earlier epochs measured (cumulus/engine/recompute.py).
    epoch_mode: str = "auto"
    # The dialect views' SQL is written in: "spark" (as all other SQL here) or "duckdb".
    sql_dialect: str = DEFAULT_DIALECT
    spark_conf: Mapping[str, str] = field(default_factory=dict, hash=False)
    # The [pipeline] table: Airflow schedules, landing layout, lateness, retention.
    pipeline: PipelineConfig = field(default_factory=lambda: PipelineConfig(), hash=False)

    def __post_init__(self) -> None:
        home = Path(self.home).expanduser().resolve()
        object.__setattr__(self, "home", home)
        if not self.catalog_uri:
            object.__setattr__(self, "catalog_uri", sqlite_catalog_uri(home / "catalog.db"))
        warehouse = Path(self.warehouse).expanduser() if self.warehouse else home / "warehouse"
        object.__setattr__(self, "warehouse", warehouse.resolve())
        if int(self.full_validation_every) < 1:
            raise ConfigError(f"full_validation_every must be at least 1 (every epoch), got {self.full_validation_every}")
        check_dialect(self.sql_dialect)
        if self.full_refresh not in ("allow", "refuse"):
            raise ConfigError(f"full_refresh must be allow or refuse, got {self.full_refresh!r}")
        if self.publish not in PUBLISH_MODES:
            raise ConfigError(f"publish must be one of {', '.join(PUBLISH_MODES)}, got {self.publish!r}")
        if self.epoch_mode not in EPOCH_MODES:
            raise ConfigError(f"epoch_mode must be one of {', '.join(EPOCH_MODES)}, got {self.epoch_mode!r}")
        if not self.catalog_uri.startswith("jdbc:"):
            raise ConfigError(
                f"catalog_uri must be a JDBC uri (jdbc:sqlite:... or jdbc:postgresql://...), "
                f"got {self.catalog_uri!r}. Fix it in {home / CONFIG_FILE} or $CUMULUS_CATALOG_URI"
            )

    @property
    def is_sqlite(self) -> bool:
        return self.catalog_uri.startswith("jdbc:sqlite:")

    @property
    def is_local(self) -> bool:
        return self.spark_master.startswith("local")


def check_dialect(dialect: str) -> str:
    """`dialect`, if views may be written in it (SQL_DIALECTS); else ConfigError."""
    if dialect not in SQL_DIALECTS:
        raise ConfigError(f"sql_dialect must be one of {', '.join(SQL_DIALECTS)}, got {dialect!r}")
    return dialect


def sqlite_catalog_uri(db: Path) -> str:
    """The JDBC uri of the embedded catalog. WAL matters: see docs/STACK.md."""
    return f"jdbc:sqlite:{db}?journal_mode=WAL&busy_timeout=30000"


def checkout_root() -> Path | None:
    """The repository this package runs from, when it runs from a checkout (an editable
    install or PYTHONPATH): the folder above it with Cumulus's pyproject.toml. None for an
    installed wheel: then nothing is looked up beside the package."""
    root = Path(__file__).resolve().parents[1]
    project = root / "pyproject.toml"
    return root if project.is_file() and 'name = "cumulus"' in project.read_text() else None


def cache_dir() -> Path:
    """Where Cumulus keeps what it builds once per machine (the relocated Jackson jar, the
    JVM class-data archive): $CUMULUS_CACHE_DIR, else a checkout's .cache (`make setup`
    fills it), else ~/.cache/cumulus."""
    if os.environ.get("CUMULUS_CACHE_DIR"):
        return Path(os.environ["CUMULUS_CACHE_DIR"])
    root = checkout_root()
    return root / ".cache" if root else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cumulus"


def default_home() -> Path:
    return Path(os.environ.get("CUMULUS_HOME") or ".cumulus")


def load_settings(home: str | os.PathLike[str] | None = None, **overrides: Any) -> Settings:
    """Settings for `home` (default: $CUMULUS_HOME or ./.cumulus), merged from the home's
    cumulus.toml, the environment and `overrides` (keyword arguments named like the fields)."""
    home_path = Path(home) if home else default_home()
    values: dict[str, Any] = _read_toml(home_path.expanduser() / CONFIG_FILE)
    for name, var in ENV_VARS.items():
        if os.environ.get(var):
            values[name] = os.environ[var]
    values.update({k: v for k, v in overrides.items() if v is not None})
    known = {f.name for f in fields(Settings)} - {"home"}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(
            f"unknown setting(s) {', '.join(unknown)} in {home_path / CONFIG_FILE}; "
            f"known: {', '.join(sorted(known))}"
        )
    return Settings(home=home_path, **values)


def settings_from_args(args: argparse.Namespace, require_home: bool = True) -> Settings:
    """Settings for a CLI command: the global --home option, then as load_settings; the
    home must be initialized (NotAHomeError) unless the command makes one."""
    settings = load_settings(getattr(args, "home", None))
    if require_home:
        check_home(settings)
    return settings


def check_home(settings: Settings) -> None:
    """NotAHomeError unless settings.home is an initialized Cumulus home (it has the
    schema.sql that `cumulus init` writes first). Checked before anything is opened, so a
    read never creates a catalog in a folder that is not a home."""
    if not (settings.home / HOME_MARKER).is_file():
        what = "does not exist" if not settings.home.exists() else f"has no {HOME_MARKER}"
        raise NotAHomeError(
            f"{settings.home} is not a Cumulus home (it {what}): make one with "
            f"`cumulus --home {settings.home} init --schema SCHEMA.sql`, or point --home or $CUMULUS_HOME at one"
        )


def with_overrides(settings: Settings, **changes: Any) -> Settings:
    """A copy of `settings` with some fields changed (e.g. spark_master in tests)."""
    return replace(settings, **changes)


def read_toml(path: Path) -> dict[str, Any]:
    """The whole cumulus.toml as a dict ({} when the file does not exist)."""
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc


def _read_toml(path: Path) -> dict[str, Any]:
    data = read_toml(path)
    pipeline = data.get("pipeline", {})
    for section in SECTIONS:
        data.pop(section, None)
    data["pipeline"] = pipeline_config(pipeline, path)
    spark = data.pop("spark", None)
    if spark is not None:
        if not isinstance(spark, dict):
            raise ConfigError(f"{path}: [spark] must be a table of Spark settings")
        data["spark_conf"] = dict(_flatten_spark(spark))
    return data


def _flatten_spark(table: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """[spark] keys are Spark setting names; TOML nests dotted keys, so join them back
    and add the `spark.` prefix where it was left out (`driver.memory = "2g"`)."""
    pairs: list[tuple[str, str]] = []
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            pairs.extend(_flatten_spark(value, f"{name}."))
        else:
            pairs.append(
                (name if name.startswith("spark.") else f"spark.{name}", _conf_value(value))
            )
    return pairs


def _conf_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
