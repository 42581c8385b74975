"""The table objects of a home (cumulus.store.tables.HomeTables): one place makes every
name; each is its qualified Spark name as a string and keeps its parts, so PyIceberg's
name needs no split, and it survives pickling (Spark closures) as itself."""

from __future__ import annotations

import pickle

from cumulus.store.tables import HomeTables, Table, pyiceberg_name


def test_every_role_has_its_name_and_parts():
    home = HomeTables("shop")
    assert home.maps == "shop.maps.entries" and home.maps.pyiceberg == "maps.entries"
    assert home.events("orders") == "shop.events.orders" and home.base("orders") == "shop.base.orders"
    assert home.ledger_log == "shop.cumulus.ledger_log" and home.ledger == "shop.cumulus.ledger"
    assert home.registry == "shop.cumulus.views" and home.applies == "shop.cumulus.applies"
    assert (home.files, home.quarantine) == ("shop.cumulus.files", "shop.cumulus.quarantine")
    # a view's results table: the name users chose, quoted for Spark, as it is for PyIceberg
    odd = home.results("top `10` sales")
    assert odd == "shop.results.`top ``10`` sales`" and odd.pyiceberg == "results.top `10` sales"
    assert (odd.catalog, odd.namespace, odd.name) == ("shop", "results", "top `10` sales")


def test_a_table_is_its_string_everywhere_a_name_goes():
    table = HomeTables("shop").base("orders")
    assert isinstance(table, str) and f"SELECT * FROM {table}" == "SELECT * FROM shop.base.orders"
    assert {table: 1}["shop.base.orders"] == 1  # (the ledger keys snapshots by name)
    again = pickle.loads(pickle.dumps(table))
    assert isinstance(again, Table) and again == table and again.pyiceberg == "base.orders"
    assert pyiceberg_name(table) == pyiceberg_name("shop.base.orders") == "base.orders"
