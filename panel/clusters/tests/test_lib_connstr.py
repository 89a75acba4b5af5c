"""Connection details in the three formats of the managed service (pure unit tests)."""

from __future__ import annotations

import shlex

import pytest
from psycopg.conninfo import conninfo_to_dict

from panel.clusters.lib.connstr import PASSWORD_MASK, ConnectionDetails

NASTY = "p@ss:w/rd?#%&'\" with spaces"


def details(password: str = "s3cret", **kwargs: object) -> ConnectionDetails:
    values: dict[str, object] = {
        "user": "doadmin",
        "password": password,
        "host": "db.example.com",
        "port": 25060,
        "database": "defaultdb",
    }
    values.update(kwargs)
    return ConnectionDetails(**values)  # type: ignore[arg-type]


def test_it_formats_the_uri_exactly_as_the_managed_service():
    assert details().uri() == "postgresql://doadmin:s3cret@db.example.com:25060/defaultdb?sslmode=require"


def test_a_uri_without_a_password_names_only_the_user():
    uri = details(password="").uri()
    assert uri == "postgresql://doadmin@db.example.com:25060/defaultdb?sslmode=require"
    assert conninfo_to_dict(uri)["user"] == "doadmin" and "password" not in conninfo_to_dict(uri)


def test_the_flags_set_the_ssl_mode_in_libpqs_environment_not_a_psql_variable():
    assert details().flags() == (
        "PGPASSWORD=s3cret PGSSLMODE=require psql -U doadmin -h db.example.com -p 25060 -d defaultdb"
    )


def test_it_lists_the_parameters_in_order():
    assert details().params() == [
        ("username", "doadmin"),
        ("password", "s3cret"),
        ("host", "db.example.com"),
        ("port", "25060"),
        ("database", "defaultdb"),
        ("sslmode", "require"),
    ]
    assert details().params_text().splitlines()[0] == "username = doadmin"


def test_it_percent_encodes_special_characters_in_the_uri():
    uri = details(NASTY).uri()
    userinfo = uri.removeprefix("postgresql://").rsplit("@", 1)[0]
    password_part = userinfo.split(":", 1)[1]
    for char in "@:/?#&'\" ":
        assert char not in password_part
    assert "%40" in password_part and "%25" in password_part and "%20" in password_part


@pytest.mark.parametrize("password", [NASTY, "plain", "100%", "a b", "ümläut€", "back\\slash", "=;,"])
def test_the_uri_round_trips_through_libpq_parsing(password):
    d = details(password, user="app user@x", database="my-db/1")
    parsed = conninfo_to_dict(d.uri())
    assert parsed["password"] == password
    assert parsed["user"] == "app user@x"
    assert parsed["dbname"] == "my-db/1"
    assert parsed["host"] == "db.example.com"
    assert parsed["port"] == "25060"
    assert parsed["sslmode"] == "require"


def test_an_ipv6_host_is_bracketed_in_the_uri():
    parsed = conninfo_to_dict(details(host="::1").uri())
    assert parsed["host"] == "::1"


@pytest.mark.parametrize("password", [NASTY, "plain", "$(rm -rf /)", "`id`", "a\nb"])
def test_the_flags_are_shell_quoted_and_round_trip(password):
    line = details(password, user="o'neil").flags()
    words = shlex.split(line)
    assert words[0] == f"PGPASSWORD={password}"
    assert words[1] == "PGSSLMODE=require"
    assert words[2:] == [
        "psql",
        "-U",
        "o'neil",
        "-h",
        "db.example.com",
        "-p",
        "25060",
        "-d",
        "defaultdb",
    ]


def test_shown_masks_the_password_literally_in_every_format():
    shown = details(NASTY).shown(reveal=False)
    assert shown.password == PASSWORD_MASK == "********"
    assert shown.uri == "postgresql://doadmin:********@db.example.com:25060/defaultdb?sslmode=require"
    assert shown.flags == (
        "PGPASSWORD=******** PGSSLMODE=require psql -U doadmin -h db.example.com -p 25060 -d defaultdb"
    )
    assert ("password", "********") in shown.params
    texts = [shown.uri, shown.flags, *(value for _key, value in shown.params)]
    for text in texts:
        assert NASTY not in text
        assert "p@ss" not in text and "p%40ss" not in text and "%2A" not in text
    assert NASTY not in repr(shown)
    assert (shown.user, shown.host, shown.port, shown.database) == (
        "doadmin",
        "db.example.com",
        25060,
        "defaultdb",
    )


def test_shown_revealed_gives_the_real_password_quoted_as_each_format_needs():
    d = details(NASTY)
    shown = d.shown(reveal=True)
    assert shown.password == NASTY
    assert shown.uri == d.uri()
    assert conninfo_to_dict(shown.uri)["password"] == NASTY  # percent-encoding intact
    assert "%40" in shown.uri and "%25" in shown.uri
    assert shown.flags == d.flags()
    assert shlex.split(shown.flags)[0] == f"PGPASSWORD={NASTY}"
    assert list(shown.params) == d.params()


def test_render_refuses_an_unknown_format():
    with pytest.raises(ValueError, match="Unknown format"):
        details().render("yaml")


MORE = (("198.18.0.12", 26010), ("198.18.0.13", 26020))


def test_several_entries_make_libpqs_multi_host_uri_with_the_session_attribute():
    uri = details(host="198.18.0.11", more_hosts=MORE, target_session_attrs="read-write").uri()
    assert uri == (
        "postgresql://doadmin:s3cret@198.18.0.11:25060,198.18.0.12:26010,198.18.0.13:26020/defaultdb"
        "?sslmode=require&target_session_attrs=read-write"
    )
    parsed = conninfo_to_dict(uri)
    assert parsed["host"] == "198.18.0.11,198.18.0.12,198.18.0.13"
    assert parsed["port"] == "25060,26010,26020"
    assert parsed["target_session_attrs"] == "read-write"


def test_several_entries_in_the_flags_and_the_parameters():
    multi = details(host="198.18.0.11", more_hosts=MORE, target_session_attrs="prefer-standby")
    words = shlex.split(multi.flags())
    assert "PGTARGETSESSIONATTRS=prefer-standby" in words
    assert words[words.index("-h") + 1] == "198.18.0.11,198.18.0.12,198.18.0.13"
    assert words[words.index("-p") + 1] == "25060,26010,26020"
    params = dict(multi.params())
    assert params["host"] == "198.18.0.11,198.18.0.12,198.18.0.13" and params["port"] == "25060,26010,26020"
    assert params["target_session_attrs"] == "prefer-standby"
    shown = multi.shown(reveal=False)
    assert shown.target_session_attrs == "prefer-standby" and PASSWORD_MASK in shown.uri


def test_one_entry_keeps_the_managed_services_single_host_form():
    one = details()
    assert "target_session_attrs" not in one.uri() and "PGTARGETSESSIONATTRS" not in one.flags()
    assert "target_session_attrs" not in dict(one.params())
