"""`cumulus m3 check|fmt`: validate and pretty-print M3 programs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cumulus.commands.inputs import compile_files, load_program, read_text
from cumulus.errors import CumulusError
from cumulus.m3.dataflow import dataflow
from cumulus.m3.parser import parse_program
from cumulus.m3.printer import format_program
from cumulus.m3.validate import CheckedProgram, validate
from cumulus.schema import load_schema


def describe(checked: CheckedProgram, shared: dict[str, list[str]] | None = None) -> str:
    """A report of the maps (keys, value type, depth, who reads them) and the dataflow."""
    flow = dataflow(checked.program)
    lines = ["maps:"]
    width = max((len(n) for n in checked.maps), default=0)
    for name in flow.order:
        info = checked.maps[name]
        keys = ", ".join(f"{k}: {t}" for k, t in zip(info.key_names, info.key_types, strict=True))
        depth = flow.depth[name]
        line = f"  {name.ljust(width)}  [{keys}] -> {info.type}   depth {'cycle' if depth is None else depth}"
        if shared is not None:
            users = shared.get(name, [])
            line += f"   {'shared by' if len(users) > 1 else 'used by'} {', '.join(users)}"
        lines.append(line)
    lines.append("dataflow (event: target <- maps read):")
    edges: dict[tuple[str, str, tuple[str, ...]], list[str]] = {}
    for e in flow.edges:
        edges.setdefault((e.event[1:], e.target, e.sources), []).append(e.event[0])
    for (relation, target, sources), signs in edges.items():
        event = "".join(dict.fromkeys(signs)) + relation.upper()
        lines.append(f"  {event:<14} {target} <- {', '.join(sources) or '(event values)'}")
    if flow.cycles:
        lines.append("cycles: " + "; ".join(" -> ".join(c) for c in flow.cycles))
    if checked.derived:
        lines.append("derived triggers (insertion times -1): " + ", ".join(d.upper() for d in checked.derived))
    return "\n".join(lines) + "\n"


def cmd_check(args: argparse.Namespace) -> int:
    if all(p.endswith(".sql") for p in args.program):
        compiled = compile_files(args.program, args.schema)
        checked, sharing = compiled.checked, compiled.sharing()
        what = f"{len(args.program)} view(s) compiled"
    elif len(args.program) == 1:
        checked, sharing, what = load_program(args.program[0], args.schema), None, args.program[0]
    else:
        raise CumulusError("give one M3 program, or one or more SQL view files (*.sql)")
    sys.stdout.write(f"{what}: ok ({len(checked.program.triggers)} triggers, {len(checked.maps)} maps)\n")
    sys.stdout.write(describe(checked, sharing))
    return 0


def cmd_fmt(args: argparse.Namespace) -> int:
    text = read_text(args.program)
    program = parse_program(text, source=args.program)
    if args.schema:
        validate(program, load_schema(args.schema), text)
    out = format_program(program)
    if args.write and args.program != "-":
        Path(args.program).write_text(out)
    else:
        sys.stdout.write(out)
    return 0


def register(subparsers) -> None:
    m3 = subparsers.add_parser("m3", help="check and format M3 trigger programs")
    sub = m3.add_subparsers(dest="m3_command", metavar="SUBCOMMAND")
    sub.required = True
    check = sub.add_parser(
        "check", help="validate a program against a schema; print maps, depths and the dataflow"
    )
    check.add_argument(
        "program", nargs="+",
        help="an M3 program file ('-' for standard input), or SQL view files compiled together "
        "(then the report shows which views share each map)",
    )
    check.add_argument("--schema", required=True, help="SQL DDL file declaring the relations")
    check.set_defaults(func=cmd_check)
    fmt = sub.add_parser("fmt", help="pretty-print a program in the canonical style")
    fmt.add_argument("program", help="M3 program file ('-' for standard input)")
    fmt.add_argument("--schema", help="also validate against this DDL file")
    fmt.add_argument("-w", "--write", action="store_true", help="rewrite the file in place")
    fmt.set_defaults(func=cmd_fmt)
