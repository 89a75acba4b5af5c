"""Advice before a launch, never blocking (pure, no Django): a run that will work badly.

Written once for every engine: what pgbench and sysbench share (clients over the server's or the
pooler's limit, statement pools and transactions, session pools that queue, prepared statements
through PgBouncer before 1.21, threads and progress that do not fit).
"""

from __future__ import annotations

import re

from benchmarks.lib.run_options import PGBOUNCER_PREPARED_SINCE, RunOptions
from panel.core.errors import N_, Message


def _parse_version(version: str | tuple[int, ...] | None) -> tuple[int, ...] | None:
    if version is None or isinstance(version, tuple):
        return version
    numbers = re.findall(r"\d+", version)
    return tuple(int(number) for number in numbers[:3]) or None


def warnings(
    options: RunOptions,
    scale: int | None = None,
    target_max_connections: int | None = None,
    pool_mode: str | None = None,
    pgbouncer_version: str | tuple[int, ...] | None = None,
    script_uses_transactions: bool | None = None,
    *,
    pool_size: int | None = None,
) -> list[Message]:
    """Non-blocking warnings about a run that will work badly; ``pool_mode`` None means direct."""
    found: list[Message] = []
    clients = options.clients
    uses_transactions = (
        options.script_uses_transactions if script_uses_transactions is None else script_uses_transactions
    )
    if scale is not None and clients > scale and options.script == "tpcb-like":
        found.append(
            Message(
                N_(
                    "%(clients)s clients on a scale of %(scale)s: every TPC-B-like transaction updates one of "
                    "%(scale)s branch rows, so clients mostly wait for each other's row locks. "
                    "Initialise with a scale of at least %(clients)s to measure the server rather than lock "
                    "contention."
                ),
                "run.warn_lock_contention",
                clients=clients,
                scale=scale,
            )
        )
    found += client_limit_warnings(options, "pgbench", target_max_connections, pool_mode)
    if pool_mode == "statement" and uses_transactions:
        found.append(
            Message(
                N_(
                    "Statement pools reject transaction blocks, and the %(script)s script uses BEGIN ... END: "
                    "every client will abort ('transaction blocks not allowed in statement pooling mode'). "
                    "Use select-only, a script without transactions, or a transaction pool."
                ),
                "run.warn_statement_pool_transactions",
                script=options.script,
            )
        )
    if pool_mode == "session" and pool_size is not None and clients > pool_size:
        found.append(
            Message(
                N_(
                    "In session mode each client keeps a server connection for its whole session: "
                    "%(waiting)s of %(clients)s clients will wait for one of the %(size)s and may be "
                    "dropped (query_wait_timeout). Use a transaction pool to share connections."
                ),
                "run.warn_session_pool_wait",
                waiting=clients - pool_size,
                clients=clients,
                size=pool_size,
            )
        )
    version = _parse_version(pgbouncer_version)
    if (
        options.query_mode == "prepared"
        and pool_mode in ("transaction", "statement")
        and (version is None or version < PGBOUNCER_PREPARED_SINCE)
    ):
        shown = f"PgBouncer {'.'.join(map(str, version))}" if version else "PgBouncer < 1.21"
        found.append(
            Message(
                N_(
                    "%(pgbouncer)s does not track prepared statements in %(mode)s pools: clients will fail "
                    "with 'prepared statement \"P_0\" does not exist'. Use the simple or extended query mode."
                ),
                "run.warn_prepared_through_pool",
                pgbouncer=shown,
                mode=pool_mode,
            )
        )
    if options.threads > 1 and clients % options.threads:
        found.append(
            Message(
                N_(
                    "%(clients)s clients do not divide evenly among %(threads)s threads: "
                    "some threads will drive more clients than others."
                ),
                "run.warn_uneven_threads",
                clients=clients,
                threads=options.threads,
            )
        )
    found += progress_warnings(options)
    return found


def client_limit_warnings(
    options: RunOptions, tool: str, target_max_connections: int | None, pool_mode: str | None
) -> list[Message]:
    """More clients than the server (direct) or PgBouncer (through a pool) accepts: every engine."""
    clients = options.clients
    if target_max_connections is None or clients <= target_max_connections:
        return []
    if pool_mode is None:
        return [
            Message(
                N_(
                    "%(clients)s clients but the server accepts at most %(max)s connections for this "
                    "user: %(tool)s will not start (connections refused). Use a connection pool or fewer "
                    "clients."
                ),
                "run.warn_over_server_limit",
                clients=clients,
                max=target_max_connections,
                tool=tool,
            )
        ]
    return [
        Message(
            N_(
                "%(clients)s clients but PgBouncer accepts at most %(max)s client connections: "
                "the extra clients will be refused."
            ),
            "run.warn_over_pooler_limit",
            clients=clients,
            max=target_max_connections,
        )
    ]


def progress_warnings(options: RunOptions) -> list[Message]:
    """A progress interval longer than the run: every engine."""
    if options.duration_s is not None and options.progress_interval_s > options.duration_s:
        return [
            Message(
                N_("The progress interval is longer than the run: no progress will be reported."),
                "run.warn_progress_too_long",
            )
        ]
    return []
