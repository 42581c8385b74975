"""Fixtures of the SQL-read tests: one tiny TPC-H home for the whole run (sqlreadskit)."""

from __future__ import annotations

import pytest
from sqlreadskit import build_home


@pytest.fixture(scope="session")
def tpch_home(spark, tmp_path_factory):
    """Settings of the tiny TPC-H home: epoch 1 closed, deletes applied on main."""
    return build_home(spark, tmp_path_factory.mktemp("sqlreads"))
