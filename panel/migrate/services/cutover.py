"""A running migration's state (the lag per database) and its end: cut over, or cancel."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from panel.clusters.face import dbconn, transitions
from panel.clusters.models import Cluster
from panel.core.agent import on_node
from panel.core.errors import N_, Message, ServiceError
from panel.env import env_int
from panel.migrate.lib import source as source_lib
from panel.migrate.models import MigrationStatus, OnlineMigration
from panel.migrate.services import source as remote
from panel.migrate.services import target
from panel.migrate.services.actions import _undo, latest

log = logging.getLogger(__name__)

CATCH_UP_POLL = 0.2
# How long a cut-over waits for the cluster to catch up before refusing.
CUTOVER_SECONDS = env_int("PANEL_MIGRATION_CUTOVER_SECONDS", 60, minimum=1)
STATE_UNREADABLE = N_(
    "The cluster did not answer with the migration's state just now; try again in a moment. The "
    "panel's log holds the details for an administrator."
)


@dataclass
class DatabaseState:
    """One migrated database: its tables copied so far and how far behind the source it is."""

    name: str
    tables_ready: int = 0
    tables: int = 0
    lag_bytes: int | None = None

    @property
    def lag(self) -> str:
        return source_lib.lag_text(self.lag_bytes)


@dataclass
class MigrationState:
    """What the page, the API and the command line show of a migration."""

    id: str
    status: str
    created_at: str
    source: str
    databases: list[DatabaseState] = field(default_factory=list)
    message: str = ""
    error: str = ""

    @property
    def status_word(self) -> str:
        """The status in the active language (``syncing``: „synchronisiert“)."""
        return str(MigrationStatus(self.status).label)


def progress_words(step: str) -> str:
    """A running migration's step (``schema:<db>``, ``subscribing``, ``rows``) in words."""
    if step.startswith("schema:"):
        return str(Message(N_("Copying the schema of “%(database)s”."), database=step.split(":", 1)[1]))
    if step == "subscribing":
        return str(Message(N_("Subscribing to the source.")))
    if step == "rows":
        return str(Message(N_("Copying the rows.")))
    return ""


def _state(migration: OnlineMigration) -> MigrationState:
    return MigrationState(
        id=str(migration.pk),
        status=str(migration.status),
        created_at=migration.created_at.isoformat(),
        source=f"{migration.host}:{migration.port}",
        databases=[DatabaseState(name=name) for name in migration.databases],
        message=progress_words(migration.progress_message) if migration.is_active else "",
        error=migration.error_message,
    )


@on_node(timeout=60)
def migration_status(cluster: Cluster) -> MigrationState | None:
    """The newest migration into ``cluster`` (None: never one), with each database's tables
    copied and lag while it runs; the first read that finds every table copied marks it syncing."""
    migration = latest(cluster)
    if migration is None:
        return None
    state = _state(migration)
    if not migration.is_active:
        return state
    if not migration.subscriptions:
        # Set up with nothing to replicate (the databases had no table): nothing to wait for.
        if migration.progress_message == "rows" and migration.mark_syncing():
            state.status, state.message = str(migration.status), ""
        return state
    password = migration.password
    try:
        for db in state.databases:
            subscription = migration.subscriptions.get(db.name)
            if subscription is None:
                continue
            db.tables_ready, db.tables = target.table_states(cluster, db.name, subscription)
            failures = target.errors_seen(cluster, subscription)
            if failures:
                state.message = str(
                    Message(
                        N_(
                            "The replication workers of “%(database)s” failed %(count)s times; the Logs tab says why."
                        ),
                        database=db.name,
                        count=failures,
                    )
                )
            with remote.connect(migration.source, migration.address, password, db.name) as conn:
                db.lag_bytes = remote.slot_lag(conn, subscription)
    except ServiceError as exc:
        state.message = exc.message
        return state
    except dbconn.DatabaseError as exc:
        # The cluster's own words name its socket directory: the log keeps them.
        log.warning("state of migration %s into %s: %s", migration.pk, cluster.name, exc)
        state.message = str(Message(STATE_UNREADABLE))
        return state
    if migration.status == MigrationStatus.RUNNING and all(
        db.tables_ready == db.tables for db in state.databases
    ):
        migration.mark_syncing()
        state.status, state.message = str(migration.status), ""
    return state


def _get(cluster: Cluster, migration_id: str) -> OnlineMigration:
    # pk=None (not an id) finds no row; the stubs want a key.
    migration = OnlineMigration.objects.filter(cluster=cluster, pk=_uuid(migration_id)).first()  # type: ignore[misc]
    if migration is None:
        raise ServiceError(N_("No online migration with that id."), code="migration.not_found", params={})
    return migration


def _uuid(text: str) -> str | None:
    import uuid

    try:
        return str(uuid.UUID(str(text)))
    except ValueError:
        return None


def _catch_up(migration: OnlineMigration) -> None:
    """Wait until every subscription confirmed the source's WAL as it is now; a refusal when
    that takes longer than PANEL_MIGRATION_CUTOVER_SECONDS (nothing is changed then)."""
    password = migration.password
    deadline = time.monotonic() + CUTOVER_SECONDS
    for dbname, subscription in migration.subscriptions.items():
        with remote.connect(migration.source, migration.address, password, dbname) as conn:
            mark = remote.current_lsn(conn)
            while (lag := remote.slot_lag(conn, subscription, since=mark)) is None or lag > 0:
                if time.monotonic() > deadline:
                    raise ServiceError(
                        N_(
                            "The cluster has not caught up with the source database “%(database)s” yet; "
                            "stop the writes on the source and try again."
                        ),
                        code="migration.behind",
                        params={"database": dbname},
                    )
                time.sleep(CATCH_UP_POLL)


@on_node(timeout=180)
def stop_migration(cluster: Cluster, migration_id: str) -> OnlineMigration:
    """End the migration: once syncing, cut over (the cluster catches up, sequence values are
    copied, replication is removed; the data stays: ``done``); before that, cancel (``canceled``,
    the databases it created dropped)."""
    migration = _get(cluster, migration_id)
    if not migration.is_active:
        migration.finish(MigrationStatus.CANCELED)  # refuses: it has ended
    if migration.status == MigrationStatus.RUNNING:
        migration_status(cluster)
        migration.refresh_from_db()
    if migration.status == MigrationStatus.SYNCING:
        _catch_up(migration)
        password = migration.password
        for dbname in migration.subscriptions:
            with remote.connect(migration.source, migration.address, password, dbname) as conn:
                values = remote.sequences(conn)
            target.set_sequences(cluster, dbname, values)
        _undo(migration, drop_created=False)
        migration.finish(MigrationStatus.DONE)
        transitions.log_event(cluster, "migration-done", Message(N_("Online migration cut over from %(host)s:%(port)s."),
                                                    host=migration.host, port=migration.port))  # fmt: skip
        return migration
    _undo(migration, drop_created=True)
    migration.finish(MigrationStatus.CANCELED)
    transitions.log_event(
        cluster,
        "migration-canceled",
        Message(
            N_("Online migration canceled."),
        ),
    )
    return migration
