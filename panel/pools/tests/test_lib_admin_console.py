"""Admin console parsers on PgBouncer 1.18's real SHOW output, idle and under load, and its log."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from panel.pools.lib.admin_console import (
    AdminConsoleError,
    DatabaseRow,
    PoolRow,
    clients_by_state,
    diff_databases,
    parse_log_errors,
    parse_show_clients,
    parse_show_databases,
    parse_show_pools,
    parse_show_stats,
    parse_table_text,
    pool_totals,
    quote_ident,
)
from panel.pools.lib.pgbouncer_ini import PoolSpec, ServerTarget

FIXTURES = Path(__file__).parent / "fixtures"


def capture(file: str, header: str) -> tuple[list[str], list[tuple[str, ...]]]:
    """The table under ``header`` (a ``### ...`` or ``## ...`` line) in a reference capture."""
    lines = (FIXTURES / file).read_text().splitlines()
    start = lines.index(header) + 1
    body = []
    for line in lines[start:]:
        if line.startswith(("#", "(total rows")):
            break
        body.append(line)
    return parse_table_text("\n".join(body))


IDLE = "pgbouncer_show_commands_idle.txt"
LOAD = "pgbouncer_show_commands_under_load.txt"


# --- text tables -------------------------------------------------------------------------------


def test_parse_table_text_reads_aligned_and_unaligned_tables() -> None:
    aligned = capture(IDLE, "### SHOW DATABASES (aligned)")
    unaligned = capture(IDLE, "## SHOW DATABASES")
    assert aligned[0] == unaligned[0]
    assert aligned[0][:3] == ["name", "host", "port"]
    assert len(aligned[1]) == 7
    assert aligned[1][:3] == unaligned[1]
    assert aligned[1][0][:5] == ("pgbouncer", "", "56432", "pgbouncer", "pgbouncer")


def test_parse_table_text_refuses_ragged_rows() -> None:
    with pytest.raises(AdminConsoleError, match="3 cells for 2 columns"):
        parse_table_text("a|b\n1|2|3\n")


# --- SHOW DATABASES ----------------------------------------------------------------------------


def test_show_databases_idle() -> None:
    rows = {row.name: row for row in parse_show_databases(*capture(IDLE, "### SHOW DATABASES (aligned)"))}
    assert sorted(rows) == ["pgbouncer", "pool20", "pool8", "poolB", "sess20", "stmt20", "test-pool"]
    assert rows["test-pool"] == DatabaseRow(
        name="test-pool",
        host="127.0.0.1",
        port=55432,
        database="bench150",
        force_user=None,
        pool_size=97,
        pool_mode="transaction",
        max_connections=0,
        current_connections=97,
        paused=False,
        disabled=False,
    )
    admin = rows["pgbouncer"]
    assert (admin.host, admin.force_user, admin.pool_mode) == (None, "pgbouncer", "statement")
    assert rows["sess20"].pool_mode == "session"


def test_show_databases_under_load_counts_server_connections() -> None:
    rows = {row.name: row for row in parse_show_databases(*capture(LOAD, "## SHOW DATABASES"))}
    assert rows["pool20"].current_connections == 20


def test_show_databases_takes_psycopg_values() -> None:
    """psycopg hands ints and None, not text; both kinds parse to the same rows."""
    columns = ["name", "host", "port", "database", "force_user", "pool_size", "pool_mode", "paused"]
    row = parse_show_databases(columns, [("p1", None, 5432, "db", None, 4, None, 1)])[0]
    assert (row.host, row.port, row.force_user, row.pool_size, row.pool_mode, row.paused) == (
        None,
        5432,
        None,
        4,
        None,
        True,
    )


# --- SHOW POOLS --------------------------------------------------------------------------------


def test_show_pools_under_load_shows_the_saturated_pool_waiting() -> None:
    pools = {p.database: p for p in parse_show_pools(*capture(LOAD, "### SHOW POOLS (aligned)"))}
    saturated = pools["pool20"]
    assert saturated.user == "app"
    assert (saturated.cl_active, saturated.cl_waiting, saturated.sv_active) == (21, 19, 20)
    assert saturated.cl_waiting > 0
    assert saturated.maxwait == pytest.approx(0.010129)
    assert saturated.cl_cancel_req == 0
    assert saturated.pool_mode == "transaction"
    assert pools["poolB"].cl_waiting == 0
    assert pools["poolB"].maxwait == 0.0


def test_show_pools_machine_readable_capture() -> None:
    pools = {p.database: p for p in parse_show_pools(*capture(LOAD, "## SHOW POOLS"))}
    assert pools["pool20"].maxwait == pytest.approx(0.014174)


def test_show_pools_idle_keeps_server_connections_used() -> None:
    pools = {p.database: p for p in parse_show_pools(*capture(IDLE, "### SHOW POOLS (aligned)"))}
    assert pools["test-pool"].sv_used == 97
    assert pools["test-pool"].cl_active == 0


def test_maxwait_combines_seconds_and_microseconds() -> None:
    columns = ["database", "user", "maxwait", "maxwait_us"]
    assert parse_show_pools(columns, [("p", "u", 2, 500000)])[0].maxwait == 2.5
    assert parse_show_pools(["database", "user", "maxwait"], [("p", "u", 3)])[0].maxwait == 3.0
    assert parse_show_pools(["database", "user"], [("p", "u")])[0].maxwait is None


def test_unknown_columns_are_ignored_and_missing_ones_are_none() -> None:
    columns, rows = capture(LOAD, "### SHOW POOLS (aligned)")
    # A future version: one column more, sv_tested gone, the old single cancel column back.
    drop = columns.index("sv_tested")
    columns = [c for i, c in enumerate(columns) if i != drop] + ["sv_brand_new"]
    rows = [tuple(v for i, v in enumerate(row) if i != drop) + ("7",) for row in rows]
    pool = {p.database: p for p in parse_show_pools(columns, rows)}["pool20"]
    assert pool.sv_tested is None
    assert pool.cl_waiting == 19

    old = parse_show_pools(["database", "user", "cl_cancel_req", "cl_waiting"], [("p", "u", 4, 1)])[0]
    assert (old.cl_cancel_req, old.cl_waiting, old.sv_idle) == (4, 1, None)


def test_a_missing_key_column_is_an_error() -> None:
    with pytest.raises(AdminConsoleError, match="no user column"):
        parse_show_pools(["database", "cl_active"], [("p", 1)])


def test_a_non_numeric_counter_is_an_error() -> None:
    with pytest.raises(AdminConsoleError, match="Expected a number"):
        parse_show_pools(["database", "user", "cl_active"], [("p", "u", "many")])


# --- SHOW STATS --------------------------------------------------------------------------------


def test_show_stats_under_load() -> None:
    stats = {s.database: s for s in parse_show_stats(*capture(LOAD, "### SHOW STATS (aligned)"))}
    busy = stats["pool20"]
    assert busy.total_xact_count == 11067
    assert busy.total_query_count == 77263
    assert busy.total_wait_time == 112346128
    assert busy.avg_xact_count == 100
    assert busy.avg_wait_time == 1020292
    assert stats["poolB"].total_xact_count == 0


def test_show_stats_idle_machine_readable() -> None:
    stats = {s.database: s for s in parse_show_stats(*capture(IDLE, "## SHOW STATS"))}
    assert stats["pgbouncer"].total_query_count == 158
    assert stats["pool20"].avg_query_time == 0


def test_show_stats_tolerates_newer_columns() -> None:
    columns = ["database", "total_server_assignment_count", "total_xact_count"]
    row = parse_show_stats(columns, [("p", 5, 9)])[0]
    assert (row.total_xact_count, row.total_wait_time) == (9, None)


# --- SHOW CLIENTS ------------------------------------------------------------------------------


def test_show_clients_under_load() -> None:
    clients = parse_show_clients(
        *capture(
            LOAD, "### SHOW CLIENTS (aligned, header + first 4 rows; rows sorted as pgbouncer returns them)"
        )
    )
    assert len(clients) == 4
    assert clients[0].user == "doadmin"
    assert clients[0].database == "pgbouncer"
    assert clients[1].application_name == "pgbench"
    assert (clients[1].addr, clients[1].port, clients[1].state) == ("127.0.0.1", 51220, "active")
    assert clients_by_state(clients, "pool20") == {"active": 3}


def test_clients_by_state_counts_waiting_clients() -> None:
    columns = ["type", "user", "database", "state", "addr", "port"]
    rows = [("C", "app", "p", "active", "127.0.0.1", 1)] * 2 + [("C", "app", "p", "waiting", "127.0.0.1", 2)]
    rows.append(("C", "app", "other", "active", "127.0.0.1", 3))
    assert clients_by_state(parse_show_clients(columns, rows), "p") == {"active": 2, "waiting": 1}


# --- intended vs loaded ------------------------------------------------------------------------

TARGET = ServerTarget("127.0.0.1", 55432)


def reference_rows() -> list[DatabaseRow]:
    return parse_show_databases(*capture(IDLE, "### SHOW DATABASES (aligned)"))


def reference_pools() -> list[PoolSpec]:
    """What the reference file was written from, as the panel would express it (fixed user)."""
    pools = []
    for row in reference_rows():
        if row.name != "pgbouncer":
            assert row.database is not None and row.pool_size is not None and row.pool_mode is not None
            pools.append(PoolSpec(row.name, row.database, "app", row.pool_mode, row.pool_size))
    return pools


def test_diff_is_empty_when_pgbouncer_serves_what_was_meant() -> None:
    rows = [
        dataclasses.replace(r, force_user="app") if r.name != "pgbouncer" else r for r in reference_rows()
    ]
    assert diff_databases(reference_pools(), rows, target=TARGET) == []


def test_diff_reports_every_kind_of_mismatch() -> None:
    rows = {
        r.name: dataclasses.replace(r, force_user="app") for r in reference_rows() if r.name != "pgbouncer"
    }
    rows["pool20"] = dataclasses.replace(rows["pool20"], database="other")
    rows["pool8"] = dataclasses.replace(rows["pool8"], pool_size=9)
    rows["sess20"] = dataclasses.replace(rows["sess20"], pool_mode="transaction")
    rows["stmt20"] = dataclasses.replace(rows["stmt20"], force_user=None)
    rows["test-pool"] = dataclasses.replace(rows["test-pool"], port=5432)
    del rows["poolB"]
    rows["poolC"] = dataclasses.replace(rows["pool8"], name="poolC")
    assert diff_databases(reference_pools(), list(rows.values()), target=TARGET) == [
        "Pool 'pool20' points at database 'other' instead of 'bench150'.",
        "Pool 'pool8' has size 9 instead of 8.",
        "Pool 'poolB' is missing from PgBouncer.",
        "Pool 'sess20' is in transaction mode instead of session.",
        "Pool 'stmt20' logs in as the inbound user instead of 'app'.",
        "Pool 'test-pool' connects to 127.0.0.1:5432 instead of 127.0.0.1:55432.",
        "PgBouncer still serves pool 'poolC', which should not exist.",
    ]


def test_diff_checks_the_cap_of_inbound_user_pools() -> None:
    """The reference lines carry no max_db_connections; the panel's inbound pools must."""
    intended = [PoolSpec("pool20", "bench150", None, "transaction", 20)]
    rows = [r for r in reference_rows() if r.name in {"pgbouncer", "pool20"}]
    assert diff_databases(intended, rows) == [
        "Pool 'pool20' allows 0 server connections in all instead of 20."
    ]
    assert diff_databases(intended, [dataclasses.replace(rows[1], max_connections=20)]) == []


def test_diff_reads_an_empty_mode_as_the_default() -> None:
    intended = [PoolSpec("p1", "db", None, "session", 2)]
    loaded = [DatabaseRow("p1", "h", 1, "db", None, 2, None, 2, 0, False, False)]
    assert diff_databases(intended, loaded) == []
    assert diff_databases(intended, loaded, default_mode="transaction") == [
        "Pool 'p1' is in transaction mode instead of session."
    ]


def test_diff_after_the_partial_reload_of_the_reference() -> None:
    """The reference's broken file: pool8 got size 9, then loading stopped before poolC."""
    meant = [p for p in reference_pools() if p.name != "pool8"]
    meant += [PoolSpec("pool8", "bench150", "app", "transaction", 9)]
    meant += [PoolSpec("poolC", "bench150", "app", "transaction", 2)]
    rows = [
        dataclasses.replace(r, force_user="app") if r.name != "pgbouncer" else r for r in reference_rows()
    ]
    rows = [dataclasses.replace(r, pool_size=9) if r.name == "pool8" else r for r in rows]
    assert diff_databases(meant, rows) == ["Pool 'poolC' is missing from PgBouncer."]


def test_quote_ident_for_admin_commands() -> None:
    assert f"KILL {quote_ident('test-pool')}" == 'KILL "test-pool"'


# --- log ---------------------------------------------------------------------------------------


def test_parse_log_errors_picks_warnings_errors_and_fatals() -> None:
    log = (FIXTURES / "pgbouncer_log_excerpt_events.txt").read_text()
    assert parse_log_errors(log) == [
        "2026-11-22 09:31:58.516 UTC [15227] ERROR invalid command 'KILL test-pool', use SHOW HELP;",
        "2026-11-22 09:31:58.516 UTC [15227] WARNING C-0x5617b2803700: pgbouncer/doadmin@127.0.0.1:35568 "
        "pooler error: invalid command 'KILL test-pool', use SHOW HELP;",
        "2026-11-22 09:31:58.557 UTC [15227] ERROR invalid command 'RESUME test-pool', use SHOW HELP;",
        "2026-11-22 09:31:58.557 UTC [15227] WARNING C-0x5617b2803700: pgbouncer/doadmin@127.0.0.1:35576 "
        "pooler error: invalid command 'RESUME test-pool', use SHOW HELP;",
    ]


def test_parse_log_errors_from_an_offset_finds_the_reload_failure() -> None:
    text = (FIXTURES / "reload_test_actions.txt").read_text()
    log = "\n".join(line for line in text.splitlines() if line.startswith("2026-")) + "\n"
    offset = log.index("2026-11-22 09:49:28.897 UTC [15227] LOG RELOAD command issued")
    assert parse_log_errors(log, since_offset=offset) == [
        "2026-11-22 09:49:28.897 UTC [15227] ERROR syntax error in configuration "
        "(/srv/panel-data/pgbouncer/pgbouncer.ini:8), stopping loading",
        "2026-11-22 09:49:28.897 UTC [15227] WARNING config file loading failed",
    ]
    # Earlier problems (a refused server login) stay out when the offset is past them.
    assert any("server login failed" in line for line in parse_log_errors(log))


def test_parse_log_errors_skips_a_line_cut_by_the_offset() -> None:
    log = "2026-11-22 09:51:34.332 UTC [15227] ERROR syntax error in configuration\n"
    assert parse_log_errors(log, since_offset=5) == []
    assert parse_log_errors(log + "garbage\n", since_offset=len(log)) == []


@pytest.mark.parametrize("case_error", ["invalid pool mode: xyz", "unrecognized connection parameter: foo"])
def test_parse_log_errors_on_the_name_test_log(case_error: str) -> None:
    text = (FIXTURES / "pgbouncer_ini_name_tests.txt").read_text()
    log = "\n".join(line.strip() for line in text.splitlines() if line.strip().startswith("2026-"))
    assert any(line.endswith(f"ERROR {case_error}") for line in parse_log_errors(log))


def _pool_row(database: str, user: str, **counts: object) -> PoolRow:
    fields: dict[str, object] = dict.fromkeys(
        (
            "cl_active",
            "cl_waiting",
            "cl_cancel_req",
            "sv_active",
            "sv_idle",
            "sv_used",
            "sv_tested",
            "sv_login",
        ),
        None,
    )
    fields |= {"maxwait": None, "pool_mode": "transaction"} | counts
    return PoolRow(database=database, user=user, **fields)  # type: ignore[arg-type]


def test_pool_totals_sum_an_inbound_pools_roles_and_keep_the_longest_wait() -> None:
    rows = [
        _pool_row("app", "alice", cl_active=3, cl_waiting=1, sv_active=2, sv_idle=1, sv_login=1, maxwait=0.5),
        _pool_row("app", "bob", cl_active=1, sv_active=1, sv_used=2, sv_tested=1, maxwait=1.25),
        _pool_row("pgbouncer", "pgbouncer", cl_active=1),
    ]
    totals = pool_totals(rows)
    assert set(totals) == {"app", "pgbouncer"}
    app = totals["app"]
    assert (app.cl_active, app.cl_waiting, app.maxwait) == (4, 1, 1.25)
    # Servers logging in count as active; used and tested ones hold a slot like idle ones.
    assert (app.servers_active, app.servers_idle) == (4, 4)
    assert totals["pgbouncer"].servers_active == 0
    assert pool_totals([]) == {}
