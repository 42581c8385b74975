"""`cumulus sql-server`: Spark's Thrift JDBC server on the Cumulus catalog, in the
foreground (cumulus/sqlserver.py); `--set-password USER` adds a user of it instead.
docs/sql.md tells how to connect."""

from __future__ import annotations

import argparse
import sys

from cumulus.config import settings_from_args
from cumulus.errors import SQLServerError
from cumulus.sqlserver import DEFAULT_PORT, serve, set_password


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "sql-server", help="serve the catalog over JDBC (Spark Thrift server, HiveServer2 protocol)",
        description="Start Spark's Thrift JDBC/ODBC server on the home's Iceberg catalog in the "
        "foreground (Ctrl-C stops it). Connect with beeline or any HiveServer2 JDBC client; "
        "see docs/sql.md. With users (--set-password) every connection gives a user and its "
        "password; without, only the loopback address is served.",
    )
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT})")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1; any other needs users: --set-password)")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for the server to listen")
    parser.add_argument("--set-password", metavar="USER", dest="set_password",
                        help="add USER (or change its password) and exit: the password is read from "
                        "standard input when it is not a terminal, else asked twice")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    if args.set_password:
        path = set_password(settings, args.set_password, read_password())
        print(f"sql-server: user {args.set_password} set in {path}; a running server checks it at the next login")
        return 0
    return serve(settings, args.host, args.port, args.timeout)


def read_password() -> str:
    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\n")
    import getpass

    first = getpass.getpass("password: ")
    if getpass.getpass("again: ") != first:
        raise SQLServerError("the two passwords differ")
    return first
