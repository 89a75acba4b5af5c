"""The pgbench command builder's warnings: what a valid run is told before it starts (branch
contention, clients a server or a pool will refuse, statement and session pools, old PgBouncer
with prepared statements, uneven threads, silent progress)."""

from __future__ import annotations

from benchmarks.lib.pgbench_command import RunOptions, warnings

BASELINE = RunOptions(clients=50, threads=2, duration_s=30)
OVERLOAD = RunOptions(clients=150, threads=2, duration_s=30)


def test_no_warnings_for_the_baseline() -> None:
    assert warnings(BASELINE, scale=150, target_max_connections=97) == []


def test_it_warns_about_branch_contention() -> None:
    [message] = warnings(BASELINE, scale=20)
    assert str(message).startswith(
        "50 clients on a scale of 20: every TPC-B-like transaction updates one of 20 branch rows"
    )
    select_only = RunOptions(clients=50, threads=2, duration_s=30, builtin="select-only")
    assert warnings(select_only, scale=20) == []


def test_it_warns_that_a_direct_server_will_refuse_clients() -> None:
    [message] = warnings(OVERLOAD, scale=150, target_max_connections=97)
    assert str(message).startswith("150 clients but the server accepts at most 97 connections for this user")
    [pooled] = warnings(OVERLOAD, scale=150, target_max_connections=100, pool_mode="transaction")
    assert str(pooled).startswith("150 clients but PgBouncer accepts at most 100 client connections")


def test_it_warns_about_transactions_in_statement_pools() -> None:
    [message] = warnings(RunOptions(clients=10, threads=2, duration_s=10), pool_mode="statement")
    assert "transaction blocks not allowed in statement pooling mode" in message
    simple_update = RunOptions(clients=10, threads=2, duration_s=10, builtin="simple-update")
    assert len(warnings(simple_update, pool_mode="statement")) == 1
    select_only = RunOptions(clients=10, threads=2, duration_s=10, builtin="select-only")
    assert warnings(select_only, pool_mode="statement") == []
    custom = RunOptions(clients=10, threads=2, duration_s=10, custom_script_path="/s.sql")
    assert warnings(custom, pool_mode="statement") == []
    assert len(warnings(custom, pool_mode="statement", script_uses_transactions=True)) == 1


def test_it_warns_about_prepared_statements_on_old_pgbouncer() -> None:
    prepared = RunOptions(clients=4, threads=2, duration_s=5, query_mode="prepared")
    [message] = warnings(prepared, pool_mode="transaction", pgbouncer_version="1.18.0")
    assert str(message).startswith("PgBouncer 1.18.0 does not track prepared statements in transaction pools")
    assert len(warnings(prepared, pool_mode="transaction")) == 1  # unknown version
    assert warnings(prepared, pool_mode="transaction", pgbouncer_version="PgBouncer 1.21.0") == []
    assert warnings(prepared, pool_mode="transaction", pgbouncer_version=(1, 22)) == []
    assert warnings(prepared, pool_mode="session", pgbouncer_version="1.18") == []
    assert warnings(prepared) == []


def test_it_warns_about_session_pools_smaller_than_the_clients() -> None:
    [message] = warnings(OVERLOAD, pool_mode="session", pool_size=20)
    assert str(message).startswith(
        "In session mode each client keeps a server connection for its whole session: 130 of 150"
    )


def test_it_warns_about_uneven_threads_and_silent_progress() -> None:
    uneven = RunOptions(clients=10, threads=3, duration_s=5, progress_interval_s=10, builtin="select-only")
    assert warnings(uneven) == [
        "10 clients do not divide evenly among 3 threads: some threads will drive more clients than others.",
        "The progress interval is longer than the run: no progress will be reported.",
    ]
