"""Imports run downward: the layers below the engine never import it (nor the CLI, the
jobs or the pipeline), and the SQL front end and M3 never import the store's Spark side.
Read from the source (every import statement, function-local ones included)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "cumulus"
ABOVE = ("cumulus.engine", "cumulus.commands", "cumulus.cli", "cumulus.pipeline", "cumulus.quality")
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
