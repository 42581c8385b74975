"""`cumulus dbt ...`: the dbt project (dbt_project.yml at the repository root) on a Cumulus home.

    cumulus dbt profile                  write <home>/dbt/profiles.yml from the settings
    cumulus dbt generate [--check]       the generated staging models (cumulus/dbt/generate.py);
                                         --check: exit 1 naming the stale files, writing none
    cumulus dbt [--epoch N] COMMAND ...  any dbt command (run, build, test, docs generate,
                                         ls, debug, ...) with the profile written first and
                                         the home's target/ and logs/"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from cumulus.config import settings_from_args
from cumulus.dbt.profile import PROJECT_ENV, project_dir, write_profile
from cumulus.dbt.run import invocation
from cumulus.errors import CumulusError

HELP = """\
commands:
  profile                 write <home>/dbt/profiles.yml from the Cumulus settings and print its path
  generate [--check]      write models/staging from the views (--check: exit 1 if a file is stale)
  COMMAND [ARGS...]       run dbt COMMAND on the home: run, build, test, docs generate, ls, debug, ...

examples:
  cumulus --home H dbt build                      # the latest published epoch
  cumulus --home H dbt --epoch 3 build            # tag epoch-3
  cumulus --home H dbt docs generate
  cumulus dbt generate --schema demo/tpch_schema.sql demo/views/*.sql           # the demo's
  cumulus dbt generate --check --schema demo/tpch_schema.sql demo/views/*.sql   # what CI runs
"""


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "dbt", help="run the dbt project (dbt_project.yml, models/) on the home's stable snapshots",
        description="Run dbt on the Cumulus home: a dbt-spark session on the home's Iceberg "
        "catalog, reading the maps at a published epoch's tag.",
        epilog=HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--epoch", type=int, help="the epoch to read (the dbt var `epoch`); default: the latest published")
    parser.add_argument("dbt_args", nargs=argparse.REMAINDER, metavar="COMMAND ...", help="profile, generate, or a dbt command")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not args.dbt_args:
        raise CumulusError("give a command: profile, generate, or a dbt command (cumulus dbt --help)")
    command, rest = args.dbt_args[0], args.dbt_args[1:]
    if command == "profile":
        return _profile(args, rest)
    if command == "generate":
        return _generate(args, rest)
    return _dbt(args, command, rest)


def _profile(args: argparse.Namespace, rest: list[str]) -> int:
    argparse.ArgumentParser(
        prog="cumulus dbt profile",
        description="Write <home>/dbt/profiles.yml (a dbt-spark session profile on the home's Iceberg "
        "catalog) from the Cumulus settings and print its path.",
    ).parse_args(rest)
    print(write_profile(settings_from_args(args)))
    return 0


def _generate(args: argparse.Namespace, rest: list[str]) -> int:
    from cumulus.commands.inputs import add_dialect_option
    from cumulus.dbt.generate import generate

    parser = argparse.ArgumentParser(
        prog="cumulus dbt generate",
        description="Write models/staging (sources, one staging model per view, tests) from the "
        "views: the given VIEW.sql files compiled in the order given, or the home's registered views.",
    )
    parser.add_argument("views", nargs="*", help="view files (name: the file's stem); none: the home's views")
    parser.add_argument("--schema", help="the schema DDL for view files (default: the home's)")
    add_dialect_option(parser)
    parser.add_argument("--project-dir", type=Path, default=None,
                        help=f"the dbt project (default: ${PROJECT_ENV}, else the repository root)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 with one line naming the generated files that are missing, "
                        "differ or are stale")
    opts = parser.parse_args(rest)
    compilation = _compile(args, opts)
    generated = generate(compilation)
    project = opts.project_dir or project_dir()
    if opts.check:  # like `ruff format --check`: one line, exit 1 when anything would change
        diffs = generated.differences(project)
        if diffs:
            print(f"cumulus dbt generate --check: {len(diffs)} generated file(s) out of date in {project}: "
                  f"{'; '.join(diffs)} (run the same command without --check to rewrite them)", file=sys.stderr)
            return 1
        print(f"{len(generated.files)} generated files up to date", file=sys.stderr)
        return 0
    written = generated.write(project)
    for path in written:
        print(f"wrote {path}")
    print(f"{len(generated.files)} generated files, {len(written)} changed", file=sys.stderr)
    return 0


def _compile(args: argparse.Namespace, opts: argparse.Namespace):
    from cumulus.schema import load_schema
    from cumulus.sql.views import compile_views

    if not opts.views:
        from cumulus.read import Reader

        return Reader(settings_from_args(args)).compilation
    if opts.schema:
        schema = load_schema(opts.schema)
    else:
        from cumulus.store.home import load_home_schema

        schema = load_home_schema(settings_from_args(args))
    views = [(Path(p).stem.lower(), Path(p).read_text()) for p in opts.views]
    return compile_views(schema, views, opts.dialect)


def _take_epoch(args: argparse.Namespace, rest: list[str]) -> list[str]:
    """`--epoch N` after the dbt command (`cumulus dbt build --epoch 3`) is ours too: dbt
    has no such option."""
    out, i = [], 0
    while i < len(rest):
        item = rest[i]
        value = None
        if item == "--epoch" and i + 1 < len(rest):
            value, i = rest[i + 1], i + 2
        elif item.startswith("--epoch="):
            value, i = item.split("=", 1)[1], i + 1
        else:
            out.append(item)
            i += 1
            continue
        if not value.isdigit():
            raise CumulusError(f"--epoch takes an epoch number, got {value!r}")
        args.epoch = int(value)
    return out


def _dbt(args: argparse.Namespace, command: str, rest: list[str]) -> int:
    """Replace this process with dbt (its output, exit code and Ctrl-C are dbt's own)."""
    settings = settings_from_args(args)
    write_profile(settings)
    rest = _take_epoch(args, rest)
    argv, env = invocation(settings, args.epoch, command, rest)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execvpe(argv[0], argv, env)
    return 0  # not reached
