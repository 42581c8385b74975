"""Batch evaluation of M3 deltas as Spark DataFrame plans (no Python UDFs): a batch of
events of one relation is joined with the slices of the maps each statement reads,
multiplied, projected onto the target's keys and summed. The engine (apply, repair)
calls `evaluate_batch` with the map state it must read; this module does no I/O.

Exactness: the events of a batch are evaluated relation by relation in a fixed order,
each relation against the state that includes the previous relations' deltas; within a
relation, every statement reads the state before the batch, and the delta-join-delta
terms of self-joins (BatchStatement.copies > 1) join copies of the batch with itself, as
DBToaster's batch compilation does. For programs compiled from SQL that is the serial
result of the batch's events in any order."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from cumulus.errors import EngineError
from cumulus.m3.ast import (
    Const,
    Expr,
    MapRef,
    Program,
    Statement,
    Var,
    terms,
)
from cumulus.m3.dataflow import dataflow
from cumulus.m3.validate import CheckedProgram, MapInfo
from cumulus.schema import STRING
from cumulus.sql.calculus import rename
from cumulus.sql.mapsql import quote
from cumulus.sql.sqltext import expr_sql, spark_literal
from cumulus.sql.to_m3 import BatchStatement
from cumulus.sql.views import ViewPlan
from cumulus.store.maps import (
    SPARK_DDL,
    VALUE_TYPES,
    delta_columns,
    key_slot,
    key_slots,
    live,
    map_slice,
    summed,
    value_slot,
)

log = logging.getLogger("cumulus.evaluate")

# ---------------------------------------------------------------- expressions


def sql_of(e: Expr, env: Callable[[str], str]) -> str:
    """An M3 expression as Spark SQL text (cumulus.sql.sqltext, exact); `env` names the
    column of each variable. Spark's NULL semantics are SQL's, as M3's are: arithmetic
    with NULL is NULL, comparisons with NULL are unknown, CASE takes unknown as false."""
    for part in e.walk():
        if isinstance(part, MapRef):
            raise EngineError(
                f"map {part.name} is read inside IF or a nested sum; the Spark engine evaluates map reads "
                "that are factors of a term (every program compiled from SQL is of that form)"
            )
    try:
        return expr_sql(e, env, exact=True)
    except TypeError as exc:
        raise EngineError(f"cannot evaluate {e!r} in Spark: {exc}") from exc


# ---------------------------------------------------------------- plans


@dataclass(frozen=True, eq=False)
class BatchPlan:
    """How a batch of each relation is applied: statements per relation, in the fixed
    relation order, and the value types of the maps."""

    order: tuple[str, ...]  # the base relations (those with events)
    statements: Mapping[str, tuple[BatchStatement, ...]]
    params: Mapping[str, tuple[str, ...]]
    checked: CheckedProgram
    # The derived relations (nested queries), each after those it reads: name -> its view
    # plan. Their events are computed, not read (cumulus/engine/derived.py).
    derived: Mapping[str, ViewPlan] = field(default_factory=dict)

    @property
    def maps(self) -> dict[str, MapInfo]:
        return self.checked.maps

    @functools.cached_property
    def reads(self) -> dict[str, set[str]]:
        """The maps each relation's statements read."""
        return {
            rel: {e.name for bs in stmts for e in bs.statement.expr.walk() if isinstance(e, MapRef)}
            for rel, stmts in self.statements.items()
        }

    @functools.cached_property
    def derived_reads(self) -> list[str]:
        """The maps the derived relations' views and triggers read, in order of first use."""
        return list(dict.fromkeys(m for name, view in self.derived.items() for m in (*view.maps, *self.reads.get(name, ()))))


def restricted(plan: BatchPlan, targets: set[str]) -> BatchPlan:
    """The plan's statements that `targets` need: those writing them, and, transitively,
    those writing the maps those read. From an empty state (a back-fill) it gives the
    targets' deltas exactly as the whole plan does, without computing the other maps."""
    needed, frontier = set(), set(targets)
    while frontier:
        needed |= frontier
        read = {
            e.name
            for stmts in plan.statements.values() for bs in stmts if bs.statement.target.name in frontier
            for e in bs.statement.expr.walk() if isinstance(e, MapRef)
        }
        for rel, view in plan.derived.items():  # a derived relation's events come from its view's maps
            if any(bs.statement.target.name in needed | frontier for bs in plan.statements.get(rel, ())):
                read |= set(view.maps)
        frontier = read - needed
    statements = {r: tuple(bs for bs in stmts if bs.statement.target.name in needed) for r, stmts in plan.statements.items()}
    return BatchPlan(plan.order, statements, plan.params, plan.checked, plan.derived)


def plan_from_compilation(
    checked: CheckedProgram, batch: Mapping[str, list[BatchStatement]], derived: Mapping[str, ViewPlan] | None = None,
) -> BatchPlan:
    schema = checked.schema
    order = tuple(r.name for r in schema.base if r.name in batch)
    nested = {name: view for name, view in (derived or {}).items() if name in batch}
    every = order + tuple(nested)
    return BatchPlan(
        order,
        {r: tuple(batch[r]) for r in every},
        {r: schema.relation(r).column_names for r in every},
        checked,
        nested,
    )


def plan_from_program(checked: CheckedProgram) -> BatchPlan:
    """A plan for a hand-written program: each event runs its own trigger (insert or
    delete). Refused when a trigger reads a map its own relation's triggers write: such a
    program's batch result depends on the order inside the batch."""
    program: Program = checked.program
    flow = dataflow(program)
    statements: dict[str, list[BatchStatement]] = {}
    params: dict[str, tuple[str, ...]] = {}
    for rel in program.relations:
        written = {e.target for e in flow.edges if e.event[1:] == rel}
        read = {s for e in flow.edges if e.event[1:] == rel for s in e.sources}
        if written & read:
            raise EngineError(
                f"the triggers of {rel.upper()} read maps they write ({', '.join(sorted(written & read))}); "
                "the Spark engine applies such programs only when they are compiled from SQL, where "
                "the delta-join-delta terms are known"
            )
        plus, minus = program.trigger("+", rel), program.trigger("-", rel)
        if plus is None or minus is None:
            raise EngineError(f"relation {rel} needs both triggers; validate the program first")
        params[rel] = plus.params
        out: list[BatchStatement] = []
        for trig in (plus, minus):
            renamed = _rename_params(trig, plus.params)
            out.extend(BatchStatement(rel, 1, s, (), sign=trig.sign) for s in renamed)
        statements[rel] = out
    order = tuple(r.name for r in checked.schema.base if r.name in statements)
    return BatchPlan(order, {r: tuple(statements[r]) for r in order}, params, checked)


def _rename_params(trig, params):
    mapping = {old: Var(new) for old, new in zip(trig.params, params, strict=True)}
    return [Statement(rename(s.target, mapping), rename(s.expr, mapping)) for s in trig.statements]  # type: ignore[arg-type]


# ---------------------------------------------------------------- evaluation

def _state_columns(info: MapInfo, state: DataFrame, tag: str) -> DataFrame:
    keys = [f"{quote(k)} AS {quote(f'{tag}_k{i}')}" for i, k in enumerate(info.key_names)]
    return state.selectExpr(*keys, f"value AS {quote(f'{tag}_v')}")


def _batch_copies(events: DataFrame, params: tuple[str, ...], bs: BatchStatement) -> DataFrame:
    """k copies of the batch (k = bs.copies > 1, a self-join's delta-join-delta term)
    joined on the statement's join columns, with `__op` the product of the copies' ops."""
    copies = [
        events.select(*[F.col(p).alias(f"{p}__{j}") for p in params], F.col("op").alias(f"__op{j}"))
        for j in range(bs.copies)
    ]
    def copy_of(column_name: str) -> int:
        return int(column_name.rsplit("__", 1)[1])

    df = copies[0]
    for j in range(1, bs.copies):
        conds = [
            F.col(a) == F.col(b)
            for a, b in bs.joins
            if max(copy_of(a), copy_of(b)) == j  # joins copy j to an earlier copy
        ]
        df = df.join(copies[j], functools.reduce(lambda x, y: x & y, conds) if conds else F.lit(True), "inner")
    op = functools.reduce(lambda x, y: x * y, [F.col(f"__op{j}") for j in range(bs.copies)])
    return df.withColumn("__op", op)


@dataclass(frozen=True)
class _Term:
    """One additive term of a batch statement: its sign, its map factors (joined in this
    order: they bind the loop variables the other factors may use) and the rest."""

    bs: BatchStatement
    sign: int
    maps: tuple[MapRef, ...]
    others: tuple[Expr, ...]

    @property
    def chain(self) -> tuple:
        """What the term's joins depend on: terms with the same chain share one join."""
        return self.bs.copies, self.bs.joins, self.bs.sign, tuple((f.name, f.args) for f in self.maps)


def _terms(statements: Sequence[BatchStatement]) -> list[_Term]:
    out = []
    for bs in statements:
        for sign, fs in terms(bs.statement.expr):
            maps = tuple(f for f in fs if isinstance(f, MapRef))
            out.append(_Term(bs, sign, maps, tuple(f for f in fs if not isinstance(f, MapRef))))
    return out


def _env(names: Mapping[str, str], bound: set[str], target: str) -> Callable[[str], str]:
    """Variables as column names (SQL text): the loop variables `names` bound, else the
    batch's (`bound`)."""

    def env(name: str) -> str:
        if name in names:
            return names[name]
        if name in bound:
            return quote(name)
        raise EngineError(f"variable {name.upper()} is unbound in {target}'s statement")

    return env


def _joined(
    term: _Term, events: DataFrame, params: tuple[str, ...], maps: Mapping[str, MapInfo], entries: DataFrame
) -> tuple[DataFrame, dict[str, str], set[str]]:
    """A term's chain on its own: the batch (a self-join's delta-join-delta term,
    BatchStatement.copies > 1: k copies of it joined on the statement's join columns),
    then joined with the slice of every map factor in turn; the columns of the loop
    variables those bind, and the batch's columns. Missing entries are 0 and a factor of
    0 adds nothing: inner joins are exact."""
    bs = term.bs
    if bs.sign is not None:
        # A hand-written trigger runs on events of its sign; `op` may be a multiplicity
        # (back-fill from base.*), and k copies of an event add k times its effect.
        events = events.where(F.col("op") > 0 if bs.sign == "+" else F.col("op") < 0)
    df = _batch_copies(events, params, bs) if bs.copies > 1 else events.selectExpr(
        *map(quote, params), "op AS `__op`")
    bound = set(df.columns) - {"__op"}
    names: dict[str, str] = {}
    env = _env(names, bound, bs.statement.target.name)
    for i, f in enumerate(term.maps):
        tag = f"__f{i}"
        slice_ = _state_columns(maps[f.name], map_slice(entries, maps[f.name]), tag)
        conds = []
        for j, a in enumerate(f.args):
            if isinstance(a, Var) and a.name not in bound and a.name not in names:
                names[a.name] = quote(f"{tag}_k{j}")  # a loop variable: ranges over the map
            else:
                conds.append(f"{quote(f'{tag}_k{j}')} = {sql_of(a, env)}")
        df = df.join(slice_, F.expr(" AND ".join(conds)) if conds else F.lit(True), "inner")
    return df, names, bound


def _delta_row(term: _Term, env: Callable[[str], str], info: MapInfo, columns: Mapping[str, str],
               factors: Sequence[str]) -> str:
    """The term's delta as a struct of the delta row columns (`columns`: name -> Spark
    type, in order), as SQL text: its map's slots filled, the others NULL; `factors`: the
    columns of its map factors' values. Text, so that a projection is one call into the
    JVM however many terms and slots it has."""
    # Compiled batch statements are signed by the events' ops; a hand-written trigger's
    # statements already carry their sign and run on events of that sign only.
    value = f"(CAST({term.sign} AS BIGINT) * {'`__op`' if term.bs.sign is None else 'abs(`__op`)'})"
    for factor in factors:
        value = f"({value} * {factor})"
    for f in term.others:
        value = f"({value} * {sql_of(f, env)})"
    filled = {slot: sql_of(a, env) for slot, a in zip(key_slots(info), term.bs.statement.target.args, strict=True)}
    filled[value_slot(info.type)] = value
    filled["map"] = spark_literal(Const(info.name, STRING))
    return "named_struct(" + ", ".join(f"'{c}', CAST({filled.get(c, 'NULL')} AS {t})" for c, t in columns.items()) + ")"


BROADCAST_ROWS = 1_000_000  # rows of a level of `_shared_deltas` broadcast to its joins, at most
STATE_BROADCAST_ROWS = 100_000  # rows of materialized deltas or state broadcast to the joins that read them, at most
SHARED_BATCH_ROWS = 1_000_000  # a rebuild's batch shares its chains' joins while its rows times its chains are at most this


@dataclass
class _Chain:
    """A chain of the shared evaluation (`_shared_deltas`): its terms, the column of each
    variable bound so far (the batch's, then the loop variables of the factors joined),
    and the columns of the values of the factors joined so far."""

    terms: list[_Term]
    env: dict[str, str]
    factors: list[str] = field(default_factory=list)

    @property
    def maps(self) -> tuple[MapRef, ...]:
        return self.terms[0].maps


def _when(ids: Sequence[int], text: Callable[[int], str]) -> str:
    """CASE over the chain id `__chain`: `text(i)` for each chain i of `ids`."""
    return "CASE `__chain` " + " ".join(f"WHEN {i} THEN {text(i)}" for i in ids) + " END"


def _ids(ids: Sequence[int]) -> str:
    return "`__chain` IN (" + ", ".join(map(str, ids)) + ")"


def _shared_deltas(
    plan: BatchPlan, rel: str, events: DataFrame, entries: DataFrame, groups: list[list[_Term]],
    columns: Mapping[str, str], size: int | None,
) -> DataFrame:
    """The delta rows of the chains of one relation whose terms read one copy of the
    batch (every chain but a self-join's delta-join-delta terms), with the maps read
    through a few shared joins instead of one per chain.

    Every event is repeated once per chain (`__chain`, the chain's id). Then, level by
    level, the rows of the chains with a map factor at that level join maps.entries once
    per set of key slots their lookups bind (not once per chain: a relation of the view
    corpus has 48 chains and needs 4 joins): each row carries its chain's map name and
    the bound key values (a CASE on `__chain`), matched against `map` and those slots of
    the entries of the group's maps; the slots a lookup leaves free bind loop variables.
    The chains that end at a level project their terms' delta rows there, in one
    projection (a CASE on `__chain` choosing the chain's array of rows).

    `size`: the batch's events, when known. The rows of a level are then counted (the
    batch times the chains at first; after a join, counted once materialized) and, up
    to BROADCAST_ROWS, broadcast to the joins, which then read maps.entries once and
    shuffle nothing: a batch after a join has no size estimate Spark trusts, and a sort-
    merge join would shuffle every entry of the maps it reads."""
    chains = {i: _Chain(group, {p: quote(p) for p in plan.params[rel]}) for i, group in enumerate(groups)}
    rows = events.selectExpr(*map(quote, plan.params[rel]), "op AS `__op`",
                             f"explode(array({', '.join(map(str, chains))})) AS `__chain`")
    for sign, test in (("+", "`__op` <= 0"), ("-", "`__op` >= 0")):  # hand-written triggers: their sign only
        signed = [i for i, c in chains.items() if c.terms[0].bs.sign == sign]
        if signed:
            rows = rows.where(f"NOT ({_ids(signed)} AND {test})")
    out: list[DataFrame] = []
    level, active = 0, list(chains)
    count = None if size is None else size * len(chains)
    while active:
        ending = [i for i in active if len(chains[i].maps) == level]
        active = [i for i in active if len(chains[i].maps) > level]
        if active and level > 0 and (ending or size is not None):
            # Materialized: counted, and read by this level's projection and the next join.
            rows, count = _materialized(rows, counted=size is not None)
        if ending:
            def terms_of(i: int) -> str:
                c = chains[i]
                return "array(" + ", ".join(
                    _delta_row(t, _env(c.env, set(), t.bs.statement.target.name), plan.maps[t.bs.statement.target.name],
                               columns, c.factors) for t in c.terms) + ")"
            projected = rows.where(_ids(ending)).selectExpr(f"explode({_when(ending, terms_of)}) AS d").select("d.*")
            out.append(projected.where(live()))
        if active:
            small = count is not None and count <= BROADCAST_ROWS
            rows = _join_level(plan, rows, entries, {i: chains[i] for i in active}, level, small)
        level += 1
    return union_all(out)


def _materialized(rows: DataFrame, counted: bool) -> tuple[DataFrame, int | None]:
    """The rows checkpointed (one Spark job) and, when `counted`, how many: a metric the
    same job observes, not a count job of its own (0.1-0.2 s of a micro-batch each)."""
    if not counted:
        return rows.localCheckpoint(), None
    from pyspark.sql import Observation

    seen = Observation()
    rows = rows.observe(seen, F.count(F.lit(1)).alias("rows")).localCheckpoint()
    return rows, int(seen.get["rows"])


def _join_level(
    plan: BatchPlan, rows: DataFrame, entries: DataFrame, chains: Mapping[int, _Chain], level: int, small: bool,
) -> DataFrame:
    """The rows of `chains` joined with the entries of each chain's map factor at `level`
    (one join per set of bound key slots; the rows broadcast when `small`); the chains'
    environments and factors gain the loop variables and the value that factor binds."""
    tag = f"__f{level}"
    have = set(entries.columns)
    groups: dict[tuple[str, ...], list[int]] = {}
    lookups: dict[int, dict[str, str]] = {}  # chain -> bound slot -> SQL of its value
    free: dict[int, dict[str, str]] = {}  # chain -> loop variable -> the slot that binds it
    for i, c in chains.items():
        f, info = c.maps[level], plan.maps[c.maps[level].name]
        env = _env(c.env, set(), c.terms[0].bs.statement.target.name)
        lookups[i], free[i] = {}, {}
        for j, a in enumerate(f.args):
            slot = key_slot(j, info.key_types[j])
            if isinstance(a, Var) and a.name in free[i]:  # restricted M3 (validate.py) has no m[X, X]
                raise EngineError(f"loop variable {a.name.upper()} appears twice in {f.name}")
            if isinstance(a, Var) and a.name not in c.env:
                free[i][a.name] = slot
            else:
                lookups[i][slot] = sql_of(a, env)  # compared as the old per-chain joins did: no cast
        groups.setdefault(tuple(sorted(lookups[i])), []).append(i)
    slots = sorted({s for i in chains for s in free[i].values()})
    types = {key_slot(j, t): SPARK_DDL[t] for i, c in chains.items() for j, t in enumerate(plan.maps[c.maps[level].name].key_types)}
    carried = [quote(c) for c in rows.columns]
    joined = []
    for bound, ids in groups.items():
        names = sorted({chains[i].maps[level].name for i in ids})
        request = rows.where(_ids(ids)).selectExpr(
            *carried, f"{_when(ids, lambda i: spark_literal(Const(chains[i].maps[level].name, STRING)))} AS `__map`",
            *(f"{_when(ids, lambda i, s=s: lookups[i][s])} AS `__b_{s}`" for s in bound))
        wanted = sorted(set(bound) | set(slots))
        side = entries.where(F.col("map").isin(names)).selectExpr(
            "`map` AS `__e_map`", *(f"{quote(s) if s in have else f'CAST(NULL AS {types[s]})'} AS `__e_{s}`" for s in wanted),
            *(f"{value_slot(t)} AS `__e_{value_slot(t)}`" for t in VALUE_TYPES))
        on = " AND ".join(["`__map` = `__e_map`", *(f"`__b_{s}` = `__e_{s}`" for s in bound)])
        joined.append((F.broadcast(request) if small else request).join(side, F.expr(on), "inner").selectExpr(
            *carried, *(f"`__e_{s}` AS `{tag}_{s}`" for s in slots),
            *(f"`__e_{value_slot(t)}` AS `{tag}_{value_slot(t)}`" for t in VALUE_TYPES)))
    for i, c in chains.items():
        c.env.update({var: f"`{tag}_{slot}`" for var, slot in free[i].items()})
        c.factors.append(f"`{tag}_{value_slot(plan.maps[c.maps[level].name].type)}`")
    return union_all(joined)


def relation_deltas(plan: BatchPlan, rel: str, events: DataFrame, entries: DataFrame, size: int | None = None,
                    per_chain: bool = False) -> DataFrame:
    """The deltas (`delta_columns`) of a batch of one relation, summed per entry (zero sums
    dropped), over the maps' state `entries` (rows shaped as maps.entries'). Terms whose
    joins are the same (the batch joined with the same map slices on the same arguments)
    form a chain that shares one join; the chains share their joins of maps.entries too
    (`_shared_deltas`): a plan's cost in Spark grows with its operators, not with the
    batch. A self-join's delta-join-delta terms join copies of the batch, one chain each.
    `per_chain`: every chain joins on its own (a rebuild's batch is a whole relation:
    repeating it once per chain, as the shared joins do, would multiply it by them),
    unless the batch's `size` times its chains is at most SHARED_BATCH_ROWS: then the
    shared joins cost less (one plan instead of one per chain; TPC-H's 22 queries over
    7,285 rows rebuilt in 120 s per chain against 50 s for the same rows applied). Then
    the chain that joins no map is summed narrow (`_narrow_sums`)."""
    columns = {c: t.simpleString() for c, t in delta_columns(plan.maps.values())}
    chains: dict[tuple, list[_Term]] = {}
    for term in _terms(plan.statements[rel]):
        chains.setdefault(term.chain, []).append(term)
    if per_chain and size is not None and size * len(chains) <= SHARED_BATCH_ROWS:
        per_chain = False
    single = [group for group in chains.values() if group[0].bs.copies == 1 and not per_chain]
    self_joins = [group for group in chains.values() if group[0].bs.copies > 1 or per_chain]
    narrow = [group for group in self_joins if _batch_alone(group, self_joins)]
    self_joins = [group for group in self_joins if group not in narrow]
    out = [_shared_deltas(plan, rel, events, entries, single, columns, size)] if single else []
    for group in self_joins:
        df, names, bound = _joined(group[0], events, plan.params[rel], plan.maps, entries)
        factors = [quote(f"__f{i}_v") for i in range(len(group[0].maps))]
        rows = [_delta_row(t, _env(names, bound, t.bs.statement.target.name), plan.maps[t.bs.statement.target.name],
                           columns, factors) for t in group]
        out.append(df.selectExpr(f"explode(array({', '.join(rows)})) AS d").select("d.*").where(live()))
    sums = [summed(union_all(out))] if out else []
    return union_all(sums + [_narrow_sums(plan, rel, events, group, columns) for group in narrow])


def _batch_alone(group: list[_Term], chains: list[list[_Term]]) -> bool:
    """Whether a chain of a rebuild reads the batch alone (one copy, no map) and writes
    maps no other chain writes: its terms can then be summed apart (`_narrow_sums`)."""
    if group[0].maps or group[0].bs.copies != 1 or group[0].bs.sign is not None:
        return False
    mine = {t.bs.statement.target.name for t in group}
    return not any(t.bs.statement.target.name in mine for other in chains if other is not group for t in other)


def _narrow_sums(plan: BatchPlan, rel: str, events: DataFrame, group: list[_Term], columns: Mapping[str, str]) -> DataFrame:
    """The summed deltas of a chain that reads the batch alone, one aggregation per key
    signature of its maps (their key slots and value type), each over rows of those
    columns only, then widened to `columns`. A rebuild's batch is a whole relation, and
    such a chain gives a delta row per row and term (60 terms of lineitem's over the
    view corpus): summed as the wide rows of every map (30-odd columns, most of them
    NULL) they cost twice as much (measured over SF 0.1's lineitem: 78.7 s against 39.0 s
    for 8.3 million entries)."""
    bound = set(plan.params[rel])
    by_signature: dict[tuple[tuple[str, ...], str], list[_Term]] = {}
    for t in group:
        info = plan.maps[t.bs.statement.target.name]
        by_signature.setdefault((tuple(key_slots(info)), info.type), []).append(t)
    batch = events.selectExpr(*map(quote, plan.params[rel]), "op AS `__op`")
    parts = []
    for (slots, type_), terms_ in by_signature.items():
        narrow = {c: columns[c] for c in ("map", *slots, value_slot(type_))}
        rows = [_delta_row(t, _env({}, bound, t.bs.statement.target.name), plan.maps[t.bs.statement.target.name],
                           narrow, []) for t in terms_]
        deltas = batch.selectExpr(f"explode(array({', '.join(rows)})) AS d").select("d.*")
        parts.append(summed(deltas).selectExpr(
            *(quote(c) if c in narrow else f"CAST(NULL AS {t}) AS {quote(c)}" for c, t in columns.items())))
    return union_all(parts)


def evaluate_batch(
    plan: BatchPlan, events: Mapping[str, DataFrame], entries: DataFrame, sizes: Mapping[str, int] | None = None,
    from_empty: bool = False,
) -> DataFrame | None:
    """Every map's deltas for a batch (`events[relation]`: the relation's columns and
    `op`) as one frame of delta rows (`delta_columns`: map, key slots, value slots),
    summed per entry with zero sums dropped; None when no relation has events.
    `entries`: the maps' state, rows shaped as maps.entries' (a map's entry is the sum of
    its rows). Relations run in the plan's order; each reads the state plus the deltas of
    the relations before it. The deltas of all maps are shaped alike so that they are
    summed by one aggregation per relation, not one per map: Spark's cost per operator,
    not the rows, is most of a small batch's. `sizes`: the events of each relation, when
    known (an apply's batch): small batches are broadcast to the joins of maps.entries.
    `from_empty`: `entries` holds nothing (a rebuild or back-fill from base.*, whose
    batches are whole relations): each relation then reads the earlier relations' deltas
    of the maps it reads, materialized once, not every delta row at each of its joins."""
    earlier: list[DataFrame] = []  # the delta rows of each relation evaluated so far
    state, parts = entries, []
    started, todo = time.perf_counter(), [r for r in plan.order if r in events and plan.statements[r]]
    for rel in plan.order:
        if rel not in events or not plan.statements[rel]:
            continue
        if from_empty:  # a rebuild takes minutes at scale: say where it is
            log.info("from base.*: %s's %d statement(s), relation %d of %d (%.0f s so far)", rel,
                     len(plan.statements[rel]), todo.index(rel) + 1, len(todo), time.perf_counter() - started)
        written = {bs.statement.target.name for bs in plan.statements[rel]}
        later = {m for r in plan.order[plan.order.index(rel) + 1 :] if r in events for m in plan.reads[r]}
        if from_empty and parts:
            state = without_statistics(union_all(parts).where(F.col("map").isin(sorted(plan.reads[rel]))))
        deltas = relation_deltas(plan, rel, events[rel], state, (sizes or {}).get(rel), per_chain=from_empty)
        if later & written:
            # A later relation of the batch reads these deltas: materialize them once, so
            # its plan does not carry (and recompute) this relation's whole evaluation.
            deltas = without_statistics(deltas)
            if from_empty:
                parts.append(deltas)
            else:
                state = state.unionByName(deltas, allowMissingColumns=True)
        earlier.append(deltas)
    if not earlier:
        return None
    return earlier[0] if len(earlier) == 1 else summed(union_all(earlier))


def without_statistics(frame: DataFrame) -> DataFrame:
    """The frame's rows, materialized once, under a plan without its size estimate
    (`counted`, which also gives their number)."""
    return counted(frame)[0]


def counted(frame: DataFrame) -> tuple[DataFrame, int]:
    """The frame's rows, materialized once, under a plan without its size estimate, and
    hinted for broadcast when they are few (at most STATE_BROADCAST_ROWS); with their
    number, counted by the same job (so that a caller asking whether there are any runs
    no other). Spark's checkpoint keeps the estimate of the plan it cut: for deltas, a
    product over every join of their evaluation. Chained (each relation's deltas joined
    by the next relation's, a derived relation's view over them), the estimates multiply
    into numbers of hundreds of thousands of digits: the corpus's rebuild spent more than
    10 minutes of the driver in BigInteger multiplication (JoinSelectionHelper.
    canBroadcastBySize). Without an estimate Spark would broadcast nothing: the count
    stands in for it. The rows stay Spark's internal ones (no conversion to Python's or
    Java's Row and back)."""
    from pyspark.sql import DataFrame as Frame
    from pyspark.sql import Observation

    seen = Observation()
    rows = frame.observe(seen, F.count(F.lit(1)).alias("rows")).localCheckpoint()
    spark, plan = rows.sparkSession, rows._jdf
    cut = Frame(spark._jsparkSession.internalCreateDataFrame(plan.queryExecution().toRdd(), plan.schema(), False), spark)
    count = int(seen.get["rows"])
    return (F.broadcast(cut) if count <= STATE_BROADCAST_ROWS else cut), count


def union_all(frames: list[DataFrame]) -> DataFrame:
    """The frames (same columns, by position) as one, unioned as a balanced tree: every
    union analyzes the plan it builds, so a left fold over n frames costs O(n^2) (40 s
    for the 241 maps of the view corpus) and a balanced one O(n log n)."""
    while len(frames) > 1:
        frames = [frames[i].unionAll(frames[i + 1]) if i + 1 < len(frames) else frames[i] for i in range(0, len(frames), 2)]
    return frames[0]
