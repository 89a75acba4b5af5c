"""What the migration writes for libpq and the password file (pure): every value quoted, the
password's separators escaped, object names from the id only."""

from __future__ import annotations

import pytest

from panel.migrate.lib import source


def test_conninfo_quotes_every_value() -> None:
    text = source.conninfo({"host": "h", "user": "a b' password=x", "passfile": None, "port": 5432})
    assert text == "host='h' user='a b\\' password=x' port='5432'"


def test_pgpass_line_escapes_separators() -> None:
    assert source.pgpass_line("a:b\\c") == "*:*:*:*:a\\:b\\\\c\n"


def test_object_name_comes_from_the_id() -> None:
    assert source.object_name("3d99e501-84f2-4e44-96f1-cb08abd25ad4") == "pgpanel_mig_3d99e50184f2"
    with pytest.raises(ValueError):
        source.object_name("x; DROP")


def test_databases_to_migrate_leave_out_templates_and_ignored() -> None:
    found = ["postgres", "template1", "shop", "app", "scratch"]
    assert source.databases_to_migrate(found, ["scratch"]) == ["app", "shop"]


@pytest.mark.parametrize(
    ("changes", "field"),
    [({"port": 0}, "port"), ({"dbname": "a;b"}, "dbname"), ({"username": ""}, "username"),
     ({"ignore_dbs": ("ok", "no way")}, "ignore_dbs")],
)  # fmt: skip
def test_check_names_the_bad_field(changes: dict, field: str) -> None:
    values = {"host": "h", "port": 5432, "dbname": "postgres", "username": "u", **changes}
    with pytest.raises(source.InvalidSource) as refused:
        source.check(source.Source(**values))
    assert refused.value.field == field
