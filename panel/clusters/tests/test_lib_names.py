"""Cluster names and PostgreSQL identifiers (pure unit tests)."""

from __future__ import annotations

import pytest

from panel.clusters.lib.names import (
    InvalidName,
    validate_cluster_name,
    validate_database_name,
    validate_node_name,
)
from panel.clusters.lib.names import validate_role_name as validate_any_role_name

PANEL_ROLES = ("pgpanel", "pgpanel_monitor", "pgpanel_migrate", "pgpanel_replication")


def validate_role_name(name: str) -> str:
    return validate_any_role_name(name, PANEL_ROLES)


@pytest.mark.parametrize("name", ["db-test", "abc", "db-postgresql-fra1-12345", "a" * 63, "x1-2-3"])
def test_it_accepts_good_cluster_names(name):
    assert validate_cluster_name(name) == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "ab",
        "a" * 64,
        "Db-test",
        "1db",
        "-db",
        "db-",
        "db_test",
        "db.test",
        "db test",
        "dbé-test",
        "db\ntest",
    ],
)
def test_it_refuses_bad_cluster_names(name):
    with pytest.raises(InvalidName):
        validate_cluster_name(name)


@pytest.mark.parametrize("name", ["app", "App_User", "_x", "user-1", "a$b", "a" * 63])
def test_it_accepts_good_identifiers(name):
    assert validate_role_name(name) == name
    assert validate_database_name(name) == name


@pytest.mark.parametrize("name", ["", "1abc", "-abc", "a b", "a.b", 'a"b', "a'b", "a;b", "a/b", "é" * 5])
def test_it_refuses_identifiers_with_other_characters(name):
    with pytest.raises(InvalidName):
        validate_role_name(name)
    with pytest.raises(InvalidName):
        validate_database_name(name)


def test_the_length_limit_counts_bytes_not_characters():
    assert validate_database_name("a" * 63)
    with pytest.raises(InvalidName, match="63 bytes"):
        validate_database_name("a" * 64)
    # 32 two-byte characters: 32 characters but 64 bytes, which PostgreSQL would truncate.
    with pytest.raises(InvalidName, match="63 bytes"):
        validate_role_name("é" * 32)
    with pytest.raises(InvalidName, match="63 bytes"):
        validate_role_name("a" * 61 + "€")


@pytest.mark.parametrize(
    "name",
    [
        "postgres",
        "Postgres",
        "doadmin",
        "DOADMIN",
        "pgpanel",
        "pgpanel_replication",
        "PgPanel_Migrate",
        "pgbouncer",
        "public",
        "pg_monitor",
        "pg_x",
    ],
)
def test_it_refuses_reserved_role_names(name):
    with pytest.raises(InvalidName, match="reserved"):
        validate_role_name(name)


@pytest.mark.parametrize(
    "name", ["postgres", "defaultdb", "DefaultDB", "template0", "template1", "pgbouncer"]
)
def test_it_refuses_reserved_database_names(name):
    with pytest.raises(InvalidName, match="reserved"):
        validate_database_name(name)


def test_a_database_may_share_a_name_with_a_user():
    assert validate_database_name("benchmark") == "benchmark"
    assert validate_role_name("benchmark") == "benchmark"


@pytest.mark.parametrize("name", ["local", "db2", "node-b3", "A" * 40])
def test_node_names_that_name_a_queue(name: str) -> None:
    assert validate_node_name(name) == name


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "1–40"),
        ("a" * 41, "1–40"),
        ("bad.name", "1–40"),
        ("node_b", "1–40"),
        ("nöde", "1–40"),
        ("-b", "starts"),
    ],
)
def test_node_names_that_would_not(name: str, why: str) -> None:
    with pytest.raises(InvalidName, match=why):
        validate_node_name(name)
