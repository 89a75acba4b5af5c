"""Rendering of the panel's postgresql.conf part, pg_hba.conf and pg_ident.conf (pure unit tests)."""

from __future__ import annotations

import pytest

from panel.clusters.lib.pgconf import ServerSettings, guard_lines, loads_guard, render_hba, render_ident


def _settings(**kwargs: object) -> ServerSettings:
    values: dict[str, object] = {
        "port": 26000,
        "listen_addresses": "127.0.0.1",
        "socket_dir": "/var/lib/pgpanel/clusters/abc/run",
        "max_connections": 25,
        "superuser_reserved_connections": 3,
        "shared_buffers_bytes": 256 * 1024**2,
        "log_dir": "/var/lib/pgpanel/clusters/abc/log",
    }
    values.update(kwargs)
    return ServerSettings(**values)  # type: ignore[arg-type]


def _conf(text: str) -> dict[str, str]:
    pairs = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, value = (part.strip() for part in line.split("=", 1))
        assert key not in pairs, f"{key} set twice"
        pairs[key] = value
    return pairs


def test_it_renders_the_required_settings():
    conf = _conf(_settings().render())
    assert conf["port"] == "26000"
    assert conf["listen_addresses"] == "'127.0.0.1'"
    assert conf["unix_socket_directories"] == "'/var/lib/pgpanel/clusters/abc/run'"
    assert conf["unix_socket_permissions"] == "0700"
    assert conf["max_connections"] == "25"
    assert conf["superuser_reserved_connections"] == "3"
    assert conf["shared_buffers"] == "262144kB"
    assert conf["password_encryption"] == "'scram-sha-256'"
    assert conf["ssl"] == "on"
    assert conf["ssl_cert_file"] == "'server.crt'"
    assert conf["ssl_key_file"] == "'server.key'"
    assert conf["ssl_min_protocol_version"] == "'TLSv1.2'"
    assert conf["log_directory"] == "'/var/lib/pgpanel/clusters/abc/log'"
    assert conf["log_filename"] == "'postgresql.log'"
    assert conf["log_file_mode"] == "0600"


def test_it_follows_the_plan_figures():
    conf = _conf(_settings(max_connections=100, shared_buffers_bytes=1024**3).render())
    assert conf["max_connections"] == "100"
    assert conf["shared_buffers"] == "1048576kB"


def _hba_rules(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def _first_match(rules: list[list[str]], *, conn_type: str, user: str, ssl: bool) -> list[str]:
    """The rule PostgreSQL picks: the first whose type and user match (database is always all)."""
    for rule in rules:
        kind, _database, rule_user = rule[:3]
        type_ok = (
            (conn_type == "local" and kind == "local")
            or (conn_type == "tcp" and kind == "host")
            or (conn_type == "tcp" and ssl and kind == "hostssl")
            or (conn_type == "tcp" and not ssl and kind == "hostnossl")
        )
        if type_ok and rule_user in {"all", user}:
            return rule
    raise AssertionError("no rule matches: PostgreSQL would reject implicitly")


def test_hba_rejects_tcp_without_tls():
    rules = _hba_rules(render_hba("pgpanel", "pgpanel_monitor"))
    assert _first_match(rules, conn_type="tcp", user="doadmin", ssl=False)[-1] == "reject"


def test_hba_requires_scram_over_tls():
    rules = _hba_rules(render_hba("pgpanel", "pgpanel_monitor"))
    rule = _first_match(rules, conn_type="tcp", user="doadmin", ssl=True)
    assert rule[0] == "hostssl" and rule[-1] == "scram-sha-256"


def test_hba_rejects_the_superuser_over_tcp_even_with_tls():
    rules = _hba_rules(render_hba("pgpanel", "pgpanel_monitor"))
    assert _first_match(rules, conn_type="tcp", user="pgpanel", ssl=True)[-1] == "reject"
    assert _first_match(rules, conn_type="tcp", user="pgpanel", ssl=False)[-1] == "reject"


def test_hba_lets_the_superuser_in_over_the_socket_with_a_password():
    rules = _hba_rules(render_hba("pgpanel", "pgpanel_monitor"))
    assert _first_match(rules, conn_type="local", user="pgpanel", ssl=False)[-1] == "scram-sha-256"


def test_hba_never_trusts_anybody():
    text = render_hba("pgpanel", "pgpanel_monitor")
    assert "trust" not in text and " md5" not in text and "password" not in text


GUARD = "/var/lib/pgpanel/lib/pg15/pgpanel_guard.so"
RESERVED = ("pg_execute_server_program", "pg_read_server_files", "pgpanel", "pgpanel_monitor")


def test_it_loads_the_privilege_guard_by_absolute_path_with_its_reserved_roles():
    conf = _conf(_settings(preload_libraries=(GUARD,), reserved_roles=RESERVED).render())
    assert conf["shared_preload_libraries"] == f'\'"{GUARD}", "pg_stat_statements"\''
    assert conf["pgpanel_guard.reserved_roles"] == (
        '\'"pg_execute_server_program", "pg_read_server_files", "pgpanel", "pgpanel_monitor"\''
    )


def test_it_renders_no_guard_when_given_none():
    text = _settings().render()
    assert "shared_preload_libraries" not in text and "pgpanel_guard" not in text


def test_it_tells_a_configuration_with_the_guard_from_one_without():
    with_guard = _settings(preload_libraries=(GUARD,), reserved_roles=RESERVED).render()
    assert loads_guard(with_guard, (GUARD,), RESERVED)
    assert not loads_guard(_settings().render(), (GUARD,), RESERVED)
    assert not loads_guard(with_guard, ("/elsewhere/pgpanel_guard.so",), RESERVED)
    assert not loads_guard(with_guard, (GUARD,), RESERVED[:2])


def test_it_preloads_pg_stat_statements_beside_the_guard_for_top_level_statements_only():
    conf = _conf(_settings(preload_libraries=(GUARD,), reserved_roles=RESERVED).render())
    assert conf["pg_stat_statements.track"] == "top"
    assert conf["pg_stat_statements.track_utility"] == "off"
    assert int(conf["pg_stat_statements.max"]) >= 100


def test_a_configuration_rendered_before_pg_stat_statements_still_counts_as_loading_the_guard():
    # Otherwise the reconciler would restart every existing cluster as one "without the guard".
    before = "\n".join(guard_lines((GUARD,), RESERVED))
    assert loads_guard(before, (GUARD,), RESERVED)


def test_it_escapes_quotes_and_backslashes_in_paths():
    odd = "/srv/it's\\here/pgpanel_guard.so"
    conf = _conf(_settings(preload_libraries=(odd,), reserved_roles=RESERVED).render())
    assert (
        conf["shared_preload_libraries"]
        == "'\"/srv/it''s\\\\here/pgpanel_guard.so\", \"pg_stat_statements\"'"
    )
    with pytest.raises(ValueError):
        _settings(preload_libraries=('/a"b.so',), reserved_roles=RESERVED).render()


def test_hba_lets_the_monitor_role_in_over_the_socket_with_a_password():
    rules = _hba_rules(render_hba("pgpanel", "pgpanel_monitor"))
    assert _first_match(rules, conn_type="local", user="pgpanel_monitor", ssl=False)[-1] == "scram-sha-256"


def test_hba_knows_every_other_role_on_the_socket_only_through_the_pooler_map():
    """PgBouncer logs in over the socket as the cluster's OS user, which the map lets in; no
    password sits in any of its files."""
    rules = _hba_rules(render_hba("pgpanel", "pgpanel_monitor"))
    assert _first_match(rules, conn_type="local", user="doadmin", ssl=False)[-2:] == ["peer", "map=pgbouncer"]
    assert _first_match(rules, conn_type="tcp", user="doadmin", ssl=True)[-1] == "scram-sha-256"


def test_ident_maps_the_cluster_user_to_each_role_once():
    text = render_ident("pgc-1a2b3c4d", ["doadmin", "app", "Mixed$Case-1", "app"])
    lines = [line.split() for line in text.splitlines() if line and not line.startswith("#")]
    assert lines == [
        ["pgbouncer", '"pgc-1a2b3c4d"', '"Mixed$Case-1"'],
        ["pgbouncer", '"pgc-1a2b3c4d"', '"app"'],
        ["pgbouncer", '"pgc-1a2b3c4d"', '"doadmin"'],
    ]


def test_ident_without_roles_lets_nobody_in():
    assert [line for line in render_ident("pgc-1a2b3c4d", []).splitlines() if not line.startswith("#")] == []


@pytest.mark.parametrize(("os_user", "role"), [("pgc-1", 'a"b'), ("pgc-1", "a b"), ("/^.*$", "x"), ("u", "")])
def test_ident_refuses_what_it_cannot_write_safely(os_user, role):
    with pytest.raises(ValueError, match="pg_ident.conf"):
        render_ident(os_user, [role])


def test_hba_without_trusted_sources_is_the_file_every_cluster_had():
    """An empty list means open: existing clusters' files stay byte for byte what they were."""
    text = render_hba("pgpanel", "pgpanel_monitor", [])
    assert text == render_hba("pgpanel", "pgpanel_monitor")
    assert "hostssl all       all           all  scram-sha-256\n" in text


def test_hba_with_trusted_sources_lets_tls_clients_in_from_those_ranges_only():
    text = render_hba("pgpanel", "pgpanel_monitor", ["10.99.0.0/16", "2001:db8::/32"])
    rules = _hba_rules(text)
    tcp = [rule for rule in rules if rule[0] != "local" and "pgpanel" not in rule[2]]
    assert tcp == [
        ["hostssl", "all", "all", "10.99.0.0/16", "scram-sha-256"],
        ["hostssl", "all", "all", "2001:db8::/32", "scram-sha-256"],
        ["host", "all", "all", "10.99.0.0/16", "reject"],
        ["host", "all", "all", "2001:db8::/32", "reject"],
    ]
    # No "all" address is left for TCP: anyone else matches no line at all.
    assert not [rule for rule in tcp if rule[3] == "all"]
    # The panel's socket lines come first, whatever the sources.
    assert rules[:3] == _hba_rules(render_hba("pgpanel", "pgpanel_monitor"))[:3]


def test_hba_writes_a_single_address_with_its_prefix_length():
    rules = _hba_rules(render_hba("pgpanel", "pgpanel_monitor", ["203.0.113.7"]))
    assert ["hostssl", "all", "all", "203.0.113.7/32", "scram-sha-256"] in rules


@pytest.mark.parametrize("bad", ["all", "10.0.0.0/8 trust", "samenet", "10.0.0.0/8\nlocal all all trust"])
def test_hba_refuses_a_source_that_is_no_address_or_network(bad):
    with pytest.raises(ValueError):
        render_hba("pgpanel", "pgpanel_monitor", [bad])
