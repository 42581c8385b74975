"""Imports run downward: the layers below the engine never import it (nor the CLI, the
jobs or the pipeline), and the SQL front end and M3 never import the store's Spark side;
every package has a rank and imports only packages of lower ranks, so there is no
cycle. Read from the source (every import statement, function-local ones included)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "cumulus"
ABOVE = ("cumulus.engine", "cumulus.commands", "cumulus.cli", "cumulus.pipeline", "cumulus.quality", "cumulus.app",
         "cumulus.jobs")
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
    "jobs": 9,
    "pipeline": 10,
    "commands": 11,
    "cli": 12,
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


# The faces: every way in (CLI, Spark jobs, Airflow tasks and DAGs, the plugin, the warm
# engine). They go through cumulus.app for every workflow, so none writes a ledger row or
# a table: from the layers below the application they import only these reads and
# constants (a new one is a conscious addition here, after checking it writes nothing).
REPO = PACKAGE.parent
FACES = ("cumulus/commands", "cumulus/cli.py", "cumulus/jobs", "cumulus/pipeline", "plugins", "dags", "spark_jobs")
BELOW_APP = ("cumulus.store", "cumulus.engine", "cumulus.ingest", "cumulus.quality", "cumulus.dbt", "cumulus.spark")
READS = {
    "cumulus.dbt.generate": {"generate"},  # model files from the compiled views (no table)
    "cumulus.dbt.profile": {"PROJECT_ENV", "project_dir", "write_profile"},  # dbt's profiles.yml
    "cumulus.dbt.run": {"DATA_FAILED", "invocation"},  # `cumulus dbt CMD`: dbt's own command line
    "cumulus.engine.metrics": {"human_bytes"},
    "cumulus.engine.publish": {"stable_epoch"},  # which epoch the stable branch shows (a ledger read)
    "cumulus.engine.registry": {"as_full_view"},
    "cumulus.ingest.dbtoaster": {"read_stream"},
    "cumulus.ingest.formats": {"FORMATS"},
    "cumulus.ingest.landing": {"CLOSED", "FAILED", "OPEN", "PUBLISHED", "folder_ready", "is_ready", "landing_folder",
                               "plan_epoch", "run_epoch_choice"},
    "cumulus.ingest.sources": {"get_source", "load_sources"},
    "cumulus.ingest.tpch_stream": {"generate"},  # landing files of a test stream (no table)
    "cumulus.ingest.validate": {"REASONS"},
    "cumulus.quality.summary": {"EPOCH_PAGE", "read_summary", "render_report", "report_dir", "reports_root",
                                "site_dir", "summary_from_ledger"},
    "cumulus.store.catalog": {"pyiceberg_catalog", "shared_catalog"},
    "cumulus.store.files": {"committed_batches", "epoch_counts"},
    "cumulus.store.home": {"load_home_schema"},
    "cumulus.store.ledger": {"APPLIED", "CLOSED", "DONE", "FAILED", "OPEN", "current_epoch", "ledger_row", "ledger_rows",
                             "open_epoch"},
    "cumulus.store.quarantine": {"LIST_COLUMNS", "get_row", "list_rows"},
    "cumulus.store.registry": {"FULL", "M3", "SQL", "is_registered", "registered_views", "registry"},
    "cumulus.store.tables": {"MAPS", "tables_of", "pyiceberg_name"},  # tables_of: names, no table opened
    "cumulus.spark.session": {"driver_java_options", "jar_conf"},  # spark-submit's command line (no session)
}


def face_files() -> list[Path]:
    files = []
    for face in FACES:
        path = REPO / face
        files += [path] if path.suffix == ".py" else sorted(path.rglob("*.py"))
    assert len(files) > 30
    return files


def test_faces_write_nothing_but_through_the_application_layer() -> None:
    bad = []
    for f in face_files():
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Import):
                bad += [f"{f.relative_to(REPO)}: import {a.name}" for a in node.names if a.name.startswith(BELOW_APP)]
            elif isinstance(node, ast.ImportFrom) and node.module == "cumulus":  # from cumulus import store
                bad += [f"{f.relative_to(REPO)}: from cumulus import {a.name}" for a in node.names
                        if f"cumulus.{a.name}".startswith(BELOW_APP)]
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(BELOW_APP):
                allowed = READS.get(node.module, set())
                bad += [f"{f.relative_to(REPO)}: from {node.module} import {a.name}" for a in node.names
                        if a.name not in allowed]
            elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith(("import_module", "__import__")):
                bad += [f"{f.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)} (a module by name)"
                        for name in by_name(f, node) if name.startswith(BELOW_APP) or not name.startswith("cumulus.")]
    assert bad == [], "go through cumulus.app for these:\n" + "\n".join(bad)


def by_name(f: Path, call: ast.Call) -> list[str]:
    """The modules an import_module call may name: its f-string's or constant's text, or,
    for a variable, the constants of every upper-case tuple or list of the file (cli.py's
    COMMAND_MODULES); "?" when there is none."""
    arg = call.args[0] if call.args else None
    if isinstance(arg, ast.Constant):
        return [str(arg.value)]
    if isinstance(arg, ast.JoinedStr):
        return ["".join(str(v.value) if isinstance(v, ast.Constant) else "*" for v in arg.values)]
    names = [str(e.value) for node in ast.walk(ast.parse(f.read_text())) if isinstance(arg, ast.Name)
             and isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id.isupper() for t in node.targets)
             and isinstance(node.value, ast.Tuple | ast.List) for e in node.value.elts if isinstance(e, ast.Constant)]
    return names or ["?"]


def test_no_relative_imports() -> None:
    """Every import names its module in full (the checks above read absolute names only)."""
    relative = [f"{f.relative_to(REPO)}:{node.lineno}" for f in [*PACKAGE.rglob("*.py"), *face_files()]
                for node in ast.walk(ast.parse(f.read_text())) if isinstance(node, ast.ImportFrom) and node.level]
    assert relative == []


def test_no_module_imports_another_that_imports_it_back() -> None:
    """No cycle among the modules' import-time imports (outside functions and `if
    TYPE_CHECKING`), within a package too: `from cumulus.engine import close` names the
    module close, `from cumulus.engine.close import x` the module close as well."""
    modules = {}
    for f in PACKAGE.rglob("*.py"):
        parts = list(f.relative_to(PACKAGE.parent).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    graph = {}
    for name, f in modules.items():
        internal = _top_level_imports(f)[0]
        graph[name] = {m for m in internal if m in modules and m != name}
    seen, stack, on_stack, cycles = set(), [], set(), []

    def visit(node: str) -> None:
        seen.add(node)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target in on_stack:
                cycles.append(" -> ".join([*stack[stack.index(target):], target]))
            elif target not in seen:
                visit(target)
        stack.pop()
        on_stack.discard(node)

    for node in sorted(graph):
        if node not in seen:
            visit(node)
    # (a package's __init__ imported by its own modules is no cycle of code: ignore those)
    cycles = [c for c in cycles if not any(c.split(" -> ")[i].startswith(c.split(" -> ")[i + 1] + ".")
                                           for i in range(len(c.split(" -> ")) - 1))]
    assert cycles == [], "\n".join(cycles)


def test_the_spark_jobs_are_modules_that_import_no_cli_code() -> None:
    for f in [*(REPO / "spark_jobs").glob("*.py"), *(PACKAGE / "jobs").glob("*.py")]:
        assert not {m for m in imports(f) if m.startswith(("cumulus.commands", "cumulus.cli", "cumulus.pipeline"))}, f
    assert "spec_from_file_location" not in (PACKAGE / "pipeline" / "jobs.py").read_text()


def test_functions_take_a_home_not_a_spark_session_and_settings() -> None:
    """One handle: what works on a home through Spark takes a `Home` (store/tables.py),
    never the pair; readers take a reader (store/rows.py) and the settings."""
    pairs = []
    for f in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                names = [a.arg for a in node.args.posonlyargs + node.args.args]
                if any(names[i:i + 2] == ["spark", "settings"] for i in range(len(names))):
                    pairs.append(f"{f.relative_to(PACKAGE)}:{node.lineno} {node.name}")
    assert not pairs, pairs


# Third-party packages whose import costs (a JVM bridge, Arrow, a SQL parser, ...): a
# module imports a cumulus module inside a function only to put one of these off.
HEAVY = {"pyspark", "py4j", "pyiceberg", "pyarrow", "pandas", "numpy", "airflow", "great_expectations", "duckdb",
         "dbt", "sqlalchemy", "yaml", "sqlglot", "matplotlib", "fastapi", "rich"}


def _top_level_imports(path: Path) -> tuple[set[str], set[str], list[tuple[int, str]]]:
    """A module's imports at import time (outside functions and `if TYPE_CHECKING`): the
    cumulus modules and the third-party packages; and its function-local cumulus imports."""
    tree = ast.parse(path.read_text())
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}

    def enclosed(node: ast.AST) -> tuple[bool, bool]:  # (in a function, under TYPE_CHECKING)
        in_function = checking = False
        while (node := parents.get(node)) is not None:
            in_function |= isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            checking |= isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        return in_function, checking

    internal, external, local = set(), set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        in_function, checking = enclosed(node)
        if checking:
            continue
        if in_function:
            if isinstance(node, ast.ImportFrom) and node.module.startswith("cumulus"):
                local.append((node.lineno, node.module))
            continue
        for name in names:
            (internal if name.startswith("cumulus") else external).add(name)
    return internal, {n.split(".")[0] for n in external}, local


def test_function_local_imports_only_put_off_a_heavy_package() -> None:
    """A function-local import of a cumulus module is one whose import (with its own
    imports, and its packages' __init__) would pull a heavy package its importer does not
    already pull; any other belongs at the top of the module."""
    modules = {}
    for f in PACKAGE.rglob("*.py"):
        parts = list(f.relative_to(PACKAGE.parent).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    direct = {name: _top_level_imports(f) for name, f in modules.items()}

    def heavy(name: str, seen: set[str]) -> set[str]:
        found = set()
        parts = name.split(".")
        for prefix in (".".join(parts[:i]) for i in range(1, len(parts) + 1)):  # packages' __init__ first
            if prefix in modules and prefix not in seen:
                seen.add(prefix)
                internal, external, _ = direct[prefix]
                found |= external & HEAVY
                for target in internal:
                    found |= heavy(target, seen)
        return found

    bad = []
    for name, (_, _, local) in direct.items():
        mine = heavy(name, set())
        for line, target in local:
            if heavy(target, set()) <= mine:
                bad.append(f"{modules[name].relative_to(PACKAGE.parent)}:{line} imports {target} in a function")
    assert bad == [], "import these at the top of the module:\n" + "\n".join(bad)
