"""The dataflow graph of an M3 program: maps are nodes, each statement is a hyperedge
from the maps its right-hand side reads to its target, labelled by the trigger's event.
Gives each map's depth (0: written from event values only), a topological order (read
maps before the maps that read them) and the cycles, which the language allows."""

from __future__ import annotations

from dataclasses import dataclass

from cumulus.m3.ast import MapRef, Program


@dataclass(frozen=True)
class Edge:
    event: str  # e.g. "+orders"
    target: str
    sources: tuple[str, ...]


@dataclass(frozen=True)
class Dataflow:
    maps: tuple[str, ...]
    edges: tuple[Edge, ...]
    depth: dict[str, int | None]  # None for maps on or behind a cycle
    order: tuple[str, ...]  # topological; members of a cycle stay together
    cycles: tuple[tuple[str, ...], ...]

    def readers(self, name: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys(e.target for e in self.edges if name in e.sources))

    def reads(self, name: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s for e in self.edges if e.target == name for s in e.sources))


def dataflow(program: Program) -> Dataflow:
    maps = program.map_names
    edges = tuple(
        Edge(
            t.event,
            s.target.name,
            tuple(dict.fromkeys(e.name for e in s.expr.walk() if isinstance(e, MapRef))),
        )
        for t in program.triggers
        for s in t.statements
    )
    deps: dict[str, set[str]] = {m: set() for m in maps}
    for e in edges:
        deps[e.target].update(e.sources)
    components = _strongly_connected(maps, deps)
    cycles = tuple(
        tuple(c) for c in components if len(c) > 1 or next(iter(c)) in deps[next(iter(c))]
    )
    on_cycle = {m for c in cycles for m in c}
    depth: dict[str, int | None] = {}
    order: list[str] = []
    # Tarjan's algorithm yields components in reverse topological order of the
    # "reads" relation, i.e. dependencies first, which is the order we want.
    for comp in components:
        order.extend(sorted(comp, key=maps.index))
        for m in comp:
            if m in on_cycle or any(depth.get(d) is None for d in deps[m] if d not in comp):
                depth[m] = None
            else:
                depth[m] = 1 + max((depth[d] for d in deps[m]), default=-1)  # type: ignore[operator]
    return Dataflow(maps, edges, depth, tuple(order), cycles)


def _strongly_connected(nodes: tuple[str, ...], deps: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's SCC algorithm (iterative), components in dependency-first order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(deps[root], key=nodes.index)))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(deps[child], key=nodes.index))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                out.append(comp)
    return out
