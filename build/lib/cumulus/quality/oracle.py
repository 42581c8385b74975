"""The oracle: every registered view read at the tag `epoch-N` (the engine's answer,
`Reader.read_view`) against its SQL recomputed by Spark SQL over base.* at the same tag.

base.<rel> stores a multiset (per tuple `mult` copies of it, summed over the fold layers:
cumulus.store.fold.base_rows); the recomputation expands each live tuple into `mult` rows
in a temporary view and runs the view's SQL over those (sqlglot turns the view's
DuckDB-dialect SQL into Spark's and points its tables at the temporary views). AVG(e)
is recomputed as CAST(SUM(e) AS DOUBLE) / COUNT(e), the view semantics Cumulus documents
(docs/compiler.md): Spark's own AVG over a DECIMAL rounds to scale + 4, which would
differ from the exact quotient in the last digits.

The comparison joins both answers on the view's group columns. Integers and decimals
compare exactly (12.30 equals 12.3, nothing else does), dates and strings by equality,
NULL only with NULL; where either side is a DOUBLE, within the suite's tolerances."""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from cumulus.schema import Schema
from cumulus.sql.views import ViewPlan
from cumulus.store.base_sql import expand, register_expanded_base, spark_sql, temp_view_name  # noqa: F401 (re-exported for the oracle's callers)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MISSING_IN_ENGINE = "group missing in the engine's answer"
MISSING_IN_SQL = "group missing in the recomputation"


@dataclass(frozen=True)
class Tolerance:
    relative: float = 1e-9
    absolute: float = 1e-9


@dataclass
class ViewComparison:
    """One view at one epoch: every group of either answer, and what differs."""

    view: str
    columns: tuple[str, ...]
    engine_rows: int = 0
    recomputed_rows: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)  # view, group, engine, recomputed, difference
    error: str | None = None

    @property
    def differences(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if r["difference"] is not None]

    @property
    def equal(self) -> bool:
        return self.error is None and not self.differences


# ---------------------------------------------------------------- recomputation


def recompute(spark: SparkSession, plan: ViewPlan, schema: Schema, epoch: int) -> list[tuple]:
    """The view's rows by Spark SQL over the expanded base views (registered first);
    every row, LIMIT and OFFSET aside (compare_view cuts the window: rows tied at its
    edge may be any of them)."""
    return [tuple(row) for row in spark.sql(spark_sql(plan.sql, schema, epoch, plan.dialect, unlimited=True)).collect()]


# ---------------------------------------------------------------- comparison


def compare_view(
    plan: ViewPlan, engine: Sequence[tuple], recomputed: Sequence[tuple], tolerance: Tolerance = Tolerance()
) -> ViewComparison:
    """Join both answers on the group columns (on whole rows, doubles to 9 digits, when
    the view does not show every group key) and describe every difference. A view with
    LIMIT/OFFSET: `recomputed` holds every row; the engine's rows are compared with theirs,
    and their number with the window's."""
    columns = plan.column_names
    group_at = list(plan.group_positions())
    by_name = {c.name: c for c in plan.columns}
    shown = {by_name[plan.final.select[i][1].name].group_index for i in group_at}  # type: ignore[attr-defined]
    whole_rows = len(shown) < len(plan.group) or plan.bag  # a bag's equal rows repeat
    f = plan.final
    expected = len(recomputed)
    out = ViewComparison(plan.name, columns, len(engine), len(recomputed))

    def key_of(row: tuple) -> tuple:
        return tuple(_canonical(v) for v in row) if whole_rows else tuple(row[i] for i in group_at)

    if f.limit is not None or f.offset:
        expected = max(0, len(recomputed) - (f.offset or 0))
        expected = expected if f.limit is None else min(expected, f.limit)
        kept = {key_of(tuple(r)) for r in engine}
        recomputed = [r for r in recomputed if key_of(tuple(r)) in kept]
        out.recomputed_rows = expected
        if len(engine) != expected:
            out.rows.append({"view": plan.name, "group": "{}", "engine": None, "recomputed": None,
                             "difference": f"LIMIT/OFFSET: the engine has {len(engine)} rows, the recomputation {expected}"})

    def by_group(rows: Sequence[tuple]) -> dict[tuple, list[tuple]]:
        groups: dict[tuple, list[tuple]] = {}
        for row in rows:
            groups.setdefault(key_of(tuple(row)), []).append(tuple(row))
        return groups

    mine, theirs = by_group(engine), by_group(recomputed)
    for key in sorted(set(mine) | set(theirs), key=_sort_key):
        left, right = mine.get(key, []), theirs.get(key, [])
        for i in range(max(len(left), len(right))):
            a = left[i] if i < len(left) else None
            b = right[i] if i < len(right) else None
            if a is None:
                diff = MISSING_IN_ENGINE
            elif b is None:
                diff = MISSING_IN_SQL
            else:
                diff = row_difference(columns, a, b, tolerance)
            if i > 0 and diff is None and not whole_rows:  # equal rows may repeat when keyed by rows
                diff = "the group occurs more than once"
            out.rows.append(
                {
                    "view": plan.name,
                    "group": to_json({columns[j]: (a or b)[j] for j in group_at}),
                    "engine": None if a is None else to_json(dict(zip(columns, a, strict=True))),
                    "recomputed": None if b is None else to_json(dict(zip(columns, b, strict=True))),
                    "difference": diff,
                }
            )
    return out


def _canonical(v: Any) -> Any:
    """A value as a key that both answers share: numbers of any type to 9 digits."""
    if isinstance(v, (int, float, Decimal)) and not isinstance(v, bool):
        return "nan" if isinstance(v, float) and math.isnan(v) else f"{float(v):.9g}"
    return v


def row_difference(columns: Sequence[str], a: tuple, b: tuple, tolerance: Tolerance) -> str | None:
    """None when the rows are equal, else 'column: engine X, recomputed Y; ...'."""
    if len(a) != len(b):
        return f"the engine has {len(a)} columns, the recomputation {len(b)}"
    parts = [
        f"{name}: engine {_show(x)}, recomputed {_show(y)}"
        for name, x, y in zip(columns, a, b, strict=True)
        if not same_value(x, y, tolerance)
    ]
    return "; ".join(parts) or None


def same_value(a: Any, b: Any, tolerance: Tolerance = Tolerance()) -> bool:
    if a is None or b is None:
        return a is None and b is None
    numbers = (int, float, Decimal)
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, numbers) and isinstance(b, numbers):
        if isinstance(a, float) or isinstance(b, float):
            x, y = float(a), float(b)
            if math.isnan(x) or math.isnan(y):
                return math.isnan(x) and math.isnan(y)
            return math.isclose(x, y, rel_tol=tolerance.relative, abs_tol=tolerance.absolute)
        return Decimal(a) == Decimal(b)  # exact, whatever the scale
    if isinstance(a, dt.date) and isinstance(b, dt.date):
        return type(a) is type(b) and a == b
    return type(a) is type(b) and a == b


def to_json(values: dict[str, Any]) -> str:
    return json.dumps(values, default=_json_value, sort_keys=False)


def _json_value(v: Any) -> Any:
    if isinstance(v, Decimal):
        return format(v, "f")
    if isinstance(v, (dt.date, dt.datetime)):
        return v.isoformat()
    return str(v)


def _show(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, Decimal):
        return format(v, "f")
    if isinstance(v, float):
        return repr(v)
    return str(v)


def _sort_key(key: tuple) -> tuple:
    return tuple((v is not None, type(v).__name__ if v is not None else "", str(v)) for v in key)
