"""Imports run downward: the layers below the engine never import it (nor the CLI, the
jobs or the pipeline), and the SQL front end and M3 never import the store's Spark side;
every package has a rank and imports only packages of lower ranks, so there is no
cycle. Read from the source (every import statement, function-local ones included)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "cumulus"
ABOVE = ("cumulus.engine", "cumulus.commands", "cumulus.cli", "cumulus.pipeline", "cumulus.quality", "cumulus.app")
LOWER = {  # package (or module) -> prefixes it must not import
    "m3": ABOVE + ("cumulus.store", "cumulus.spark", "cumulus.sql"),
    "sql": ABOVE + ("cumulus.spark",),
    "store": ABOVE,
    "spark": ABOVE + ("cumulus.store",),
    "faults.py": ABOVE + ("cumulus.store", "cumulus.spark", "cumulus.ingest"),
    "errors.py": ("cumulus.",),
}


def imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_lower_layers_do_not_import_upper_ones() -> None:
    bad = []
    for part, banned in LOWER.items():
        files = [PACKAGE / part] if part.endswith(".py") else sorted((PACKAGE / part).rglob("*.py"))
        assert files and all(f.exists() for f in files), part
        for f in files:
            bad += [f"{f.relative_to(PACKAGE)} imports {m}" for m in imports(f) if m.startswith(banned)]
    assert bad == []


# Each top-level package or module of cumulus/ and its rank: it may import only lower ranks.
RANKS = {
    "errors": 0, "faults": 0, "progress": 0, "parallel": 0, "output": 0, "__init__": 0,
    "config": 1, "schema": 1,
    "m3": 2, "spark": 2,
    "store": 3,
    "sql": 4, "sqlserver": 4,
    "engine": 5, "ingest": 5, "dbt": 5,
    "read": 6,
    "quality": 7,
    "app": 8,
    "pipeline": 9,
    "commands": 10,
    "cli": 11,
}


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_package_imports_only_lower_ranks() -> None:
    units = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
             if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists()))}
    assert units <= set(RANKS), f"rank these: {sorted(units - set(RANKS))}"
    bad = []
    for f in sorted(PACKAGE.rglob("*.py")):
        unit = _unit(".".join(f.relative_to(PACKAGE.parent).with_suffix("").parts))
        for m in imports(f):
            if m == "cumulus" or not m.startswith("cumulus."):
                continue
            target = _unit(m)
            if target != unit and RANKS[target] >= RANKS[unit]:
                bad.append(f"{f.relative_to(PACKAGE)} ({unit}, rank {RANKS[unit]}) imports {m} (rank {RANKS[target]})")
    assert bad == [], "\n".join(bad)
