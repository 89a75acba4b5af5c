"""The pgbouncer.ini renderer and validator: golden file, PgBouncer 1.18's name tests, refusals."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from panel.pools.lib.pgbouncer_ini import (
    ConfigError,
    GlobalSettings,
    InvalidPoolName,
    PoolSpec,
    ServerTarget,
    parse_connstring,
    parse_databases_section,
    quote_cstr_value,
    render,
    validate_pool_name,
)

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = "/var/lib/pgpanel/clusters/0b6f3c1e"
TARGET = ServerTarget(f"{ROOT}/run", 25060)


def make_globals(**changes: object) -> GlobalSettings:
    settings = GlobalSettings(
        listen_port=25061,
        unix_socket_dir=f"{ROOT}/pgbouncer",
        auth_file=f"{ROOT}/pgbouncer/userlist.txt",
        logfile=f"{ROOT}/pgbouncer/pgbouncer.log",
        pidfile=f"{ROOT}/pgbouncer/pgbouncer.pid",
        client_tls_key_file=f"{ROOT}/tls/server.key",
        client_tls_cert_file=f"{ROOT}/tls/server.crt",
        admin_users=("pgpanel",),
        stats_users=("doadmin",),
    )
    return dataclasses.replace(settings, **changes)  # type: ignore[arg-type]


GOLDEN_POOLS = [
    PoolSpec("test-pool", "benchmark", "doadmin", "transaction", 97),
    PoolSpec("Reports.v2", "defaultdb", None, "session", 10),
    PoolSpec("1-stmt_pool", "benchmark", None, "statement", 5),
]


# --- golden file -------------------------------------------------------------------------------


def test_it_renders_the_golden_file() -> None:
    expected = (FIXTURES / "pgbouncer_golden.ini").read_text()
    assert render(make_globals(), TARGET, GOLDEN_POOLS) == expected


def test_output_does_not_depend_on_pool_order() -> None:
    assert render(make_globals(), TARGET, GOLDEN_POOLS[::-1]) == render(make_globals(), TARGET, GOLDEN_POOLS)


def test_the_databases_section_reads_back_as_meant() -> None:
    databases = parse_databases_section(render(make_globals(), TARGET, GOLDEN_POOLS))
    assert list(databases) == ["1-stmt_pool", "Reports.v2", "test-pool"]
    assert databases["test-pool"] == {
        "host": f"{ROOT}/run",
        "port": "25060",
        "dbname": "benchmark",
        "user": "doadmin",
        "pool_size": "97",
        "pool_mode": "transaction",
    }
    assert databases["Reports.v2"]["max_db_connections"] == "10"
    assert "user" not in databases["Reports.v2"]


def test_a_pool_line_has_the_documented_shape() -> None:
    line = render(make_globals(), ServerTarget("/path/to/socketdir", 25060), [GOLDEN_POOLS[0]]).splitlines()[
        2
    ]
    assert line.startswith("test-pool = host=/path/to/socketdir port=25060 dbname=benchmark user=doadmin ")
    assert line.endswith(" pool_size=97 pool_mode=transaction")


def test_server_tls_follows_the_target() -> None:
    over_socket = render(make_globals(), TARGET, [])
    over_tcp = render(make_globals(), ServerTarget("db.internal", 25060), [])
    assert "server_tls_sslmode = disable" in over_socket
    assert "server_tls_sslmode = require" in over_tcp
    assert "server_tls_sslmode = verify-full" in render(
        make_globals(server_tls_sslmode="verify-full"), TARGET, []
    )


def test_an_empty_pool_list_still_renders_a_loadable_file() -> None:
    text = render(make_globals(stats_users=()), TARGET, [])
    assert "[databases]\n\n[pgbouncer]" in text
    assert "stats_users" not in text
    assert parse_databases_section(text) == {}


@pytest.mark.parametrize(
    ("value", "quoted"),
    [
        ("benchmark", "benchmark"),
        ("/var/lib/x y", "'/var/lib/x y'"),
        ("it's", "'it''s'"),
        ("a;b", "'a;b'"),
        ("pa$$word", "pa$$word"),
    ],
)
def test_connection_string_values_are_quoted_when_needed(value: str, quoted: str) -> None:
    assert quote_cstr_value(value) == quoted
    assert parse_connstring(f"k={quoted} x=1") == {"k": value, "x": "1"}


# --- names, from PgBouncer 1.18's own answers --------------------------------------------------


@dataclasses.dataclass
class NameCase:
    title: str
    keys: list[str]
    loaded: set[str]


def load_name_cases() -> list[NameCase]:
    text = (FIXTURES / "pgbouncer_ini_name_tests.txt").read_text()
    cases = []
    for block in text.split("### CASE: ")[1:]:
        lines = block.splitlines()
        start = lines.index("ini lines inserted after [databases]:") + 1
        keys = []
        for line in lines[start:]:
            if not line.startswith("    "):
                break
            entry = line.strip()
            if entry[0] in ";#":
                continue
            keys.append(entry.split(" = ", 1)[0] if " = " in entry else entry.removesuffix(" ="))
        names_now = next(line for line in lines if line.startswith("SHOW DATABASES names now: "))
        loaded = set(re.findall(r"(\S+)\(size=\d+\)", names_now))
        cases.append(NameCase(lines[0], keys, loaded))
    return cases


# Every key the reference file tried, with our verdict: None = a valid name, else a fragment of
# the refusal. Names PgBouncer refused for their value (bad mode, size, ...) are valid names.
NAME_VERDICTS: dict[str, str | None] = {
    "pool8": None,
    "this line is broken": "' ' (space)",
    "poolC": None,
    "UPPER_Pool": None,
    "1-pool-x": None,
    "dot.name": None,
    "my pool": "' ' (space)",
    '"my pool"': "'\"' (double quote)",
    "a=b": "'=' (equals sign)",
    "semi;colon": "';' (semicolon)",
    "hash#name": "'#' (hash)",
    "pööl": "'ö' (U+00F6)",
    "p" * 64: "3 to 60 characters long; this one has 64",
    # PgBouncer serves 63 characters, but the panel's rule is 60.
    "q" * 63: "3 to 60 characters long; this one has 63",
    "badparam": None,
    "badmode": None,
    "badsize": None,
    "inlinec": None,
    "aftercomments": None,
    "emptyval": None,
}


def test_the_verdict_table_covers_every_reference_case() -> None:
    tried = {key for case in load_name_cases() for key in case.keys}
    assert tried == set(NAME_VERDICTS)


@pytest.mark.parametrize("name", sorted(NAME_VERDICTS), ids=lambda n: n[:20])
def test_reference_names_get_their_verdict(name: str) -> None:
    fragment = NAME_VERDICTS[name]
    if fragment is None:
        assert validate_pool_name(name) == name
    else:
        with pytest.raises(InvalidPoolName, match=re.escape(fragment)):
            validate_pool_name(name)


def test_every_name_pgbouncer_loaded_and_the_rules_allow_is_accepted() -> None:
    for case in load_name_cases():
        for key in case.keys:
            if key in case.loaded and 3 <= len(key) <= 60:
                assert validate_pool_name(key) == key, case.title


def test_every_name_pgbouncer_refused_for_its_syntax_is_refused() -> None:
    text = (FIXTURES / "pgbouncer_ini_name_tests.txt").read_text()
    for case in load_name_cases():
        block = text.split(f"### CASE: {case.title}\n", 1)[1].split("### CASE: ", 1)[0]
        refused_for_name = "syntax error in configuration" in block or "too long db name" in block
        for key in case.keys:
            if key not in case.loaded and refused_for_name and key not in {"pool8", "poolC"}:
                with pytest.raises(InvalidPoolName):
                    validate_pool_name(key)


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("", "A pool name is required."),
        ("ab", "this one has 2"),
        ("x" * 61, "this one has 61"),
        ("pgbouncer", "reserved"),
        ("PgBouncer", "reserved"),
        ("new\nline", "'\\n' (newline)"),
        ("tab\tbed", "'\\t' (tab)"),
        ("star*", "'*' (U+002A)"),
        ("comma,x", "',' (comma)"),
        ("nul\x00x", "'\\0' (NUL)"),
        ("bell\x07x", "U+0007 (a control character)"),
    ],
)
def test_it_refuses_bad_names_with_a_readable_message(name: str, fragment: str) -> None:
    with pytest.raises(InvalidPoolName, match=re.escape(fragment)):
        validate_pool_name(name)


def test_the_message_names_the_allowed_characters() -> None:
    with pytest.raises(InvalidPoolName) as exc_info:
        validate_pool_name("my pool")
    assert str(exc_info.value) == (
        "Pool names may contain only letters, digits, '_', '.' and '-'; found ' ' (space)."
    )
    # A code, a field and the character as a parameter: the edge renders it in the user's language.
    assert exc_info.value.code == "pool.name_invalid" and exc_info.value.field == "name"
    assert exc_info.value.params == {"char": "' '", "what": "space"}


@pytest.mark.parametrize(
    "name", ["abc", "a" * 60, "test-pool", "UPPER_Pool", "1-pool-x", "dot.name", "pgbouncer2"]
)
def test_it_accepts_good_names(name: str) -> None:
    assert validate_pool_name(name) == name


# --- refusals ----------------------------------------------------------------------------------

POOL = PoolSpec("test-pool", "benchmark", None, "transaction", 97)


@pytest.mark.parametrize(
    ("pool", "fragment"),
    [
        (dataclasses.replace(POOL, name="my pool"), "found ' ' (space)"),
        (dataclasses.replace(POOL, name="pgbouncer"), "reserved"),
        (dataclasses.replace(POOL, mode="xyz"), "mode must be one of session, transaction, statement"),
        (dataclasses.replace(POOL, size=0), "size must be at least 1"),
        (dataclasses.replace(POOL, size=-3), "size must be at least 1"),
        (dataclasses.replace(POOL, size="abc"), "size must be a whole number"),
        (dataclasses.replace(POOL, size=True), "size must be a whole number"),
        (dataclasses.replace(POOL, dbname=""), "database name must not be empty"),
        (dataclasses.replace(POOL, dbname="bench150 ; a comment"), "';' (semicolon)"),
        (dataclasses.replace(POOL, dbname="bench#1"), "'#' (hash)"),
        (dataclasses.replace(POOL, dbname="bench\nfoo = host=evil"), "'\\n' (newline)"),
        (dataclasses.replace(POOL, dbname=" benchmark"), "must not start or end with blanks"),
        (dataclasses.replace(POOL, dbname="d" * 64), "at most 63 bytes"),
        (dataclasses.replace(POOL, user="doadmin "), "must not start or end with blanks"),
        (dataclasses.replace(POOL, user="doa;dmin"), "';' (semicolon)"),
    ],
)
def test_it_refuses_bad_pools(pool: PoolSpec, fragment: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(fragment)):
        render(make_globals(), TARGET, [pool])


def test_it_refuses_duplicate_names() -> None:
    with pytest.raises(ConfigError, match="Two pools are named 'test-pool'"):
        render(make_globals(), TARGET, [POOL, dataclasses.replace(POOL, size=3)])


def test_no_pool_line_holds_a_password() -> None:
    """The server authenticates PgBouncer by peer over the socket: fixed users need no password."""
    databases = parse_databases_section(render(make_globals(), TARGET, GOLDEN_POOLS))
    assert all("password" not in params for params in databases.values())
    assert "password" not in render(make_globals(), TARGET, GOLDEN_POOLS)


def test_a_fixed_user_needs_the_unix_socket() -> None:
    tcp = ServerTarget("db.internal", 25060)
    with pytest.raises(ConfigError, match="needs the server's Unix socket"):
        render(make_globals(), tcp, [dataclasses.replace(POOL, user="doadmin")])
    assert "pool_mode=transaction" in render(make_globals(), tcp, [POOL])  # inbound users are fine


@pytest.mark.parametrize(
    ("target", "fragment"),
    [
        (ServerTarget("/run/my;sock", 25060), "';' (semicolon)"),
        (ServerTarget("/run/sock\n", 25060), "'\\n' (newline)"),
        (ServerTarget("host one", 25060), "one host name or IP address"),
        (ServerTarget("a,b", 25060), "one host name or IP address"),
        (ServerTarget("/run", 0), "port must be between 1 and 65535"),
        (ServerTarget("/run", 70000), "port must be between 1 and 65535"),
    ],
)
def test_it_refuses_bad_targets(target: ServerTarget, fragment: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(fragment)):
        render(make_globals(), target, [POOL])


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"logfile": "relative/pgbouncer.log"}, "logfile must be an absolute path"),
        ({"auth_file": "/a/user list.txt "}, "must not start or end with blanks"),
        ({"pidfile": "/run/x#y.pid"}, "'#' (hash)"),
        ({"unix_socket_dir": "/run/x\ny"}, "'\\n' (newline)"),
        ({"listen_addr": "127.0.0.1; rm"}, "';' (semicolon)"),
        ({"listen_addr": "127.0.0.1 ::1"}, "listen_addr must be"),
        ({"listen_port": 0}, "listen_port must be between 1 and 65535"),
        ({"auth_type": "trust"}, "auth_type must be one of"),
        ({"client_tls_sslmode": "sometimes"}, "client_tls_sslmode must be one of"),
        ({"client_tls_key_file": ""}, "client_tls_key_file must not be empty"),
        ({"server_tls_sslmode": "on"}, "server_tls_sslmode must be one of"),
        ({"admin_users": ()}, "admin_users must name at least one role"),
        ({"admin_users": "pgpanel"}, "must be a list of role names"),
        ({"admin_users": ("pg panel",)}, "' ' (space)"),
        ({"stats_users": ("a,b",)}, "',' (comma)"),
        ({"max_client_conn": 0}, "max_client_conn must be at least 1"),
        ({"default_pool_size": 0}, "default_pool_size must be at least 1"),
        ({"server_idle_timeout": -1}, "server_idle_timeout must be at least 0"),
        ({"server_reset_query": "DISCARD ALL; DROP"}, "';' (semicolon)"),
        ({"ignore_startup_parameters": ("extra_float_digits", "bad name")}, "invalid parameter name"),
        ({"pkt_buf": 100}, "pkt_buf must be at least 512"),
        ({"log_connections": "yes"}, "log_connections must be true or false"),
        ({"log_disconnections": 1}, "log_disconnections must be true or false"),
        ({"unix_socket_mode": "777"}, "unix_socket_mode must be an octal mode"),
    ],
)
def test_it_refuses_bad_globals(changes: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(fragment)):
        render(make_globals(**changes), TARGET, [POOL])


def test_tls_files_are_optional_only_without_client_tls() -> None:
    text = render(
        make_globals(client_tls_sslmode="disable", client_tls_key_file="", client_tls_cert_file=""),
        TARGET,
        [],
    )
    assert "client_tls_sslmode = disable" in text
    assert "client_tls_key_file" not in text


# --- reading back ------------------------------------------------------------------------------


def test_parse_databases_section_mirrors_pgbouncer() -> None:
    text = (
        "[databases]\n"
        "; comment one\n"
        "# comment two\n"
        "pool8 = host=127.0.0.1 port=55432 dbname=bench150 pool_size=8\n"
        "pool8 = host=127.0.0.1 port=55432 dbname=bench150 pool_size=3\n"
        "[pgbouncer]\n"
        "listen_port = 6432\n"
    )
    assert parse_databases_section(text) == {
        "pool8": {"host": "127.0.0.1", "port": "55432", "dbname": "bench150", "pool_size": "8"}
    }


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("this line is broken", "Line 2: syntax error"),
        ("my pool = host=x", "Line 2: syntax error"),
        ("inlinec = host=x dbname=b ; a comment", "Syntax error in connection string"),
        ("q = host='unterminated", "Unterminated quote"),
        ("e = dbname=", "Empty value"),
    ],
)
def test_parse_databases_section_reports_what_pgbouncer_would_stop_at(line: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(fragment)):
        parse_databases_section(f"[databases]\n{line}\n")
