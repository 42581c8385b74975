"""`cumulus sql-server`: Spark's Thrift JDBC server on the Cumulus catalog, in the
foreground (cumulus/sqlserver.py); docs/sql.md tells how to connect."""

from __future__ import annotations

import argparse

from cumulus.config import settings_from_args
from cumulus.sqlserver import DEFAULT_PORT, serve


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "sql-server", help="serve the catalog over JDBC (Spark Thrift server, HiveServer2 protocol)",
        description="Start Spark's Thrift JDBC/ODBC server on the home's Iceberg catalog in the "
        "foreground (Ctrl-C stops it). Connect with beeline or any HiveServer2 JDBC client; "
        "see docs/sql.md.",
    )
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT})")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for the server to listen")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return serve(settings_from_args(args), args.host, args.port, args.timeout)
