"""Bind an M3 program to a schema and check it: trigger arity and types, bound
variables, the restricted-M3 rules of the paper (section 2.1), consistent map arity and
key types, comparable operands. The result is a `CheckedProgram`: the program with
derived deletion triggers and the inferred type of every map (the engine and the store
create tables from it)."""

from __future__ import annotations

from dataclasses import dataclass

from cumulus.errors import M3ValidationError, Position
from cumulus.m3.ast import (
    ARGUMENT_KINDS,
    FUNCTIONS,
    And,
    BinOp,
    Call,
    Cmp,
    Cond,
    Const,
    Expr,
    If,
    IsNull,
    Like,
    MapRef,
    Neg,
    Not,
    Or,
    Program,
    Statement,
    Trigger,
    Var,
    negate_program_trigger,
    terms,
    variables,
)
from cumulus.schema import BOOL, INT, NUMERIC, STRING, Schema, promote


@dataclass(frozen=True)
class MapInfo:
    name: str
    key_names: tuple[str, ...]
    key_types: tuple[str, ...]
    type: str

    @property
    def arity(self) -> int:
        return len(self.key_types)


@dataclass(frozen=True)
class CheckedProgram:
    program: Program  # with derived deletion triggers added
    maps: dict[str, MapInfo]
    derived: tuple[str, ...]  # events whose trigger was derived, e.g. "-orders"
    schema: Schema

    def param_types(self, trigger: Trigger) -> dict[str, str]:
        rel = self.schema.relation(trigger.relation)
        return {p: c.type for p, c in zip(trigger.params, rel.columns, strict=True)}


class _Checker:
    def __init__(self, program: Program, schema: Schema, text: str):
        self.program = program
        self.schema = schema
        self.text = text
        self.key_types: dict[str, list[str | None]] = {}
        self.key_names: dict[str, list[str | None]] = {}
        self.value_types: dict[str, str] = {}
        self.first_use: dict[str, Position | None] = {}

    def error(self, what: str, pos: Position | None) -> M3ValidationError:
        return M3ValidationError(what, pos, self.text)

    # -- maps
    def use_map(self, ref: MapRef) -> None:
        arity = len(ref.args)
        if ref.name not in self.key_types:
            self.key_types[ref.name] = [None] * arity
            self.key_names[ref.name] = [None] * arity
            self.first_use[ref.name] = ref.pos
        elif len(self.key_types[ref.name]) != arity:
            first = self.first_use[ref.name]
            raise self.error(
                f"map {ref.name} is used with {arity} keys here but with "
                f"{len(self.key_types[ref.name])} at {first}",
                ref.pos,
            )

    def set_key_type(self, ref: MapRef, i: int, type_: str | None, name: str | None) -> bool:
        """Record the type of key i; True when it changed."""
        if type_ is None:
            return False
        if name and self.key_names[ref.name][i] is None:
            self.key_names[ref.name][i] = name
        known = self.key_types[ref.name][i]
        if known is None:
            self.key_types[ref.name][i] = type_
            return True
        if known != type_:
            raise self.error(
                f"key {i + 1} of map {ref.name} is {type_.upper()} here but "
                f"{known.upper()} elsewhere (map keys must have one type)",
                ref.pos,
            )
        return False

    # -- types
    def type_of(self, e: Expr, env: dict[str, str | None]) -> str | None:
        """The type of an expression; None while a loop variable's type is unknown."""
        if isinstance(e, Const):
            return None if e.value is None else e.type
        if isinstance(e, Var):
            return env.get(e.name)
        if isinstance(e, MapRef):
            for a in e.args:
                self.type_of(a, env)
            return self.value_types.get(e.name, INT)
        if isinstance(e, Neg):
            t = self.type_of(e.operand, env)
            self.need_numeric(t, e.operand, "'-'")
            return t
        if isinstance(e, BinOp):
            lt, rt = self.type_of(e.left, env), self.type_of(e.right, env)
            self.need_numeric(lt, e.left, f"'{e.op}'")
            self.need_numeric(rt, e.right, f"'{e.op}'")
            if e.op == "/":  # a quotient is a double (SQL's in DuckDB; exact decimals could not hold it)
                return "float"
            return promote(lt, rt) if lt and rt else None
        if isinstance(e, Call):
            arg_types, result = FUNCTIONS[e.func]
            if len(e.args) != len(arg_types):
                raise self.error(f"{e.func} takes {len(arg_types)} argument(s), got {len(e.args)}", e.pos)
            for a, want in zip(e.args, arg_types, strict=True):
                got = self.type_of(a, env)
                if got is not None and got not in ARGUMENT_KINDS.get(want, (want,)):
                    allowed = " or ".join(t.upper() for t in ARGUMENT_KINDS.get(want, (want,)))
                    raise self.error(f"{e.func} needs a {allowed} argument, got {got.upper()}", e.pos)
            return result
        if isinstance(e, If):
            self.check_cond(e.cond, env)
            tt, et = self.type_of(e.then, env), self.type_of(e.else_, env)
            if tt and et and tt != et:
                if tt in NUMERIC and et in NUMERIC:
                    return promote(tt, et)
                raise self.error(f"THEN is {tt.upper()} but ELSE is {et.upper()}; both must have one type", e.pos)
            return tt or et
        raise self.error(f"a condition cannot stand where a number is expected: {type(e).__name__}", getattr(e, "pos", None))

    def need_numeric(self, t: str | None, e: Expr, where: str) -> None:
        if t is not None and t not in NUMERIC:
            raise self.error(f"operand of {where} must be a number, got {t.upper()}", getattr(e, "pos", None))

    def check_cond(self, c: Cond, env: dict[str, str | None]) -> None:
        if isinstance(c, (And, Or)):
            self.check_cond(c.left, env)
            self.check_cond(c.right, env)
        elif isinstance(c, Not):
            self.check_cond(c.operand, env)
        elif isinstance(c, IsNull):
            self.type_of(c.operand, env)
        elif isinstance(c, Like):
            t = self.type_of(c.operand, env)
            if t is not None and t != STRING:
                raise self.error(f"LIKE needs a STRING operand, got {t.upper()}", c.pos)
            if "\\" in c.pattern:
                raise self.error("a LIKE pattern cannot hold a backslash (engines read it as an escape)", c.pos)
        elif isinstance(c, Cmp):
            lt, rt = self.type_of(c.left, env), self.type_of(c.right, env)
            if lt and rt and not (lt == rt or (lt in NUMERIC and rt in NUMERIC)):
                raise self.error(f"cannot compare {lt.upper()} with {rt.upper()}", c.pos)
            if c.op not in ("=", "<>") and BOOL in (lt, rt):
                raise self.error("booleans can only be compared with = and <>", c.pos)

    # -- structure
    def check_trigger(self, t: Trigger) -> dict[str, str | None]:
        if t.relation not in self.schema:
            known = ", ".join(self.schema.names)
            raise self.error(f"trigger on unknown relation {t.relation.upper()} (the schema declares: {known})", t.pos)
        rel = self.schema.relation(t.relation)
        if len(t.params) != rel.arity:
            raise self.error(
                f"trigger {t.event.upper()} binds {len(t.params)} variables but relation "
                f"{rel.name} has {rel.arity} columns ({', '.join(rel.column_names)})",
                t.pos,
            )
        return {p: c.type for p, c in zip(t.params, rel.columns, strict=True)}

    def check_structure(self, t: Trigger, s: Statement) -> None:
        """Full M3 (DBToaster's): every loop variable stands as a plain key of at least one
        map that is a factor of each term it occurs in; it may be a key of several such
        maps (a join of their slices on it) and need not be a key of the target (the term
        then sums over it). Forbidden, because no evaluation could bind them: a loop
        variable bound by no map factor, one inside IF or a nested sum's map, one inside a
        key expression, and one twice in one map (`m[X, X]`: write the equality as IF).
        Keys hold no maps."""
        params = set(t.params)
        target_vars = []
        for a in s.target.args:
            if any(isinstance(x, MapRef) for x in a.walk()):
                raise self.error("a map key cannot contain a map reference", s.target.pos)
            if isinstance(a, Var):
                target_vars.append(a.name)
            elif variables(a) - params:
                loose = ", ".join(sorted(v.upper() for v in variables(a) - params))
                raise self.error(
                    f"a target key uses loop variable(s) {loose} inside an expression; "
                    "loop variables must stand alone as keys",
                    s.target.pos,
                )
        loop_target = [v for v in target_vars if v not in params]
        for _sign, factors in terms(s.expr):
            term_loop_vars: dict[str, int] = {}
            for f in factors:
                for sub in f.walk():
                    if isinstance(sub, MapRef):
                        for a in sub.args:
                            if any(isinstance(x, MapRef) for x in a.walk()):
                                raise self.error("a map key cannot contain a map reference", sub.pos)
                            loose = variables(a) - params
                            if loose and not isinstance(a, Var):
                                raise self.error(
                                    f"loop variable {sorted(loose)[0].upper()} must stand alone as a key of {sub.name}",
                                    sub.pos,
                                )
                            if isinstance(a, Var) and a.name not in params:
                                if sum(1 for b in sub.args if b == a) > 1:
                                    raise self.error(
                                        f"loop variable {a.name.upper()} is twice a key of {sub.name}; write the "
                                        "equality of those keys as IF", sub.pos)
                                if sub is not f:
                                    raise self.error(
                                        f"loop variable {a.name.upper()} is a key of {sub.name}, which is not "
                                        "a factor of the right-hand side (it sits inside IF or a sum)",
                                        sub.pos,
                                    )
                                term_loop_vars[a.name] = term_loop_vars.get(a.name, 0) + 1
            free = set().union(*(variables(f) for f in factors)) - params - set(term_loop_vars)
            if free:
                v = sorted(free)[0]
                raise self.error(f"variable {v.upper()} is not bound by the trigger or by a map key", s.pos)
            for v in loop_target:
                if v not in term_loop_vars:
                    raise self.error(
                        f"target key {v.upper()} is neither a trigger variable nor a key of a map "
                        "on the right-hand side",
                        s.target.pos,
                    )
        if len(set(loop_target)) != len(loop_target):  # a trigger variable may key two slots (a self-join's delta)
            raise self.error(f"a loop variable appears twice among the keys of {s.target.name}", s.target.pos)

    def infer(self) -> None:
        """Fix point over statements: key types flow from event variables through targets
        to the maps that read them; value types only ever widen (int < decimal < float)."""
        for d in self.program.decls:
            self.key_types[d.name] = [k[1] for k in d.keys]
            self.key_names[d.name] = [k[0] for k in d.keys]
            self.first_use[d.name] = d.pos
        for _ in range(len(self.key_types) + len(self.program.triggers) * 4 + 8):
            changed = False
            for t in self.program.triggers:
                env0 = self.check_trigger(t)
                for s in t.statements:
                    refs = [s.target] + [e for e in s.expr.walk() if isinstance(e, MapRef)]
                    for ref in refs:
                        self.use_map(ref)
                    env: dict[str, str | None] = dict(env0)
                    for ref in refs[1:]:
                        for i, a in enumerate(ref.args):
                            if isinstance(a, Var) and a.name not in env0:
                                env[a.name] = env.get(a.name) or self.key_types[ref.name][i]
                    for ref in refs:
                        for i, a in enumerate(ref.args):
                            name = a.name if isinstance(a, Var) else None
                            changed |= self.set_key_type(ref, i, self.type_of(a, env), name)
                    # Loop variable types flow back from the target into unknown map keys.
                    for ref in refs[1:]:
                        for i, a in enumerate(ref.args):
                            if isinstance(a, Var) and env.get(a.name):
                                changed |= self.set_key_type(ref, i, env[a.name], a.name)
                    vt = self.type_of(s.expr, env) or INT
                    self.need_numeric(vt, s.expr, "'+=' (a map holds numbers)")
                    old = self.value_types.get(s.target.name)
                    new = vt if old is None else promote(old, vt)
                    if new != old:
                        self.value_types[s.target.name] = new
                        changed = True
            if not changed:
                return

    def check(self) -> CheckedProgram:
        seen: dict[str, Trigger] = {}
        for t in self.program.triggers:
            if t.event in seen:
                raise self.error(f"a second trigger for {t.sign}{t.relation.upper()}; merge them into one", t.pos)
            seen[t.event] = t
        self.infer()
        for t in self.program.triggers:
            for s in t.statements:
                self.check_structure(t, s)
                env = self.check_trigger(t)
                self.check_cond_in(s.expr, env)
        written = {s.target.name for _, s in self.program.statements()}
        for _, s in self.program.statements():
            for ref in (e for e in s.expr.walk() if isinstance(e, MapRef)):
                if ref.name not in written:
                    raise self.error(f"map {ref.name} is read but no statement writes it", ref.pos)
        maps: dict[str, MapInfo] = {}
        for d in self.program.decls:
            inferred = self.value_types.get(d.name)
            if inferred and promote(inferred, d.type) != d.type:
                raise self.error(
                    f"map {d.name} is declared {d.type.upper()} but its statements produce {inferred.upper()}",
                    d.pos,
                )
        for name in self.program.map_names:
            types = self.key_types.get(name, [])
            if any(t is None for t in types):
                i = types.index(None)
                raise self.error(f"cannot infer the type of key {i + 1} of map {name}", self.first_use.get(name))
            decl = next((d for d in self.program.decls if d.name == name), None)
            names = [n or f"k{i + 1}" for i, n in enumerate(self.key_names.get(name, []))]
            vtype = decl.type if decl else self.value_types.get(name, INT)
            maps[name] = MapInfo(name, _unique(names), tuple(types), vtype)  # type: ignore[arg-type]
        return self.with_derived(maps)

    def check_cond_in(self, e: Expr, env: dict[str, str | None]) -> None:
        """Loop variables inside IF conditions take their map's key type."""
        local = dict(env)
        for sub in e.walk():
            if isinstance(sub, MapRef):
                for i, a in enumerate(sub.args):
                    if isinstance(a, Var) and a.name not in local:
                        local[a.name] = self.key_types[sub.name][i]
        for sub in e.walk():
            if isinstance(sub, If):
                self.check_cond(sub.cond, local)

    def with_derived(self, maps: dict[str, MapInfo]) -> CheckedProgram:
        triggers = list(self.program.triggers)
        derived: list[str] = []
        for t in self.program.triggers:
            other = "-" if t.sign == "+" else "+"
            if self.program.trigger(other, t.relation) is None:
                d = negate_program_trigger(t)
                if other == "+":
                    d = Trigger("+", t.relation, t.params, d.statements, t.pos)
                triggers.append(d)
                derived.append(f"{other}{t.relation}")
        program = Program(self.program.decls, tuple(triggers))
        return CheckedProgram(program, maps, tuple(derived), self.schema)


def _unique(names: list[str]) -> tuple[str, ...]:
    out: list[str] = []
    for n in names:
        candidate, i = n, 2
        while candidate in out:
            candidate, i = f"{n}_{i}", i + 1
        out.append(candidate)
    return tuple(out)


def validate(program: Program, schema: Schema, text: str = "") -> CheckedProgram:
    """Check `program` against `schema`; `text` (the program's source) lets errors mark
    the offending line. Raises M3ValidationError."""
    return _Checker(program, schema, text).check()

