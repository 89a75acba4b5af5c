"""``/v2/databases/{id}/online-migration``: start a migration into a cluster (PUT), read its
status (GET), stop it (DELETE ``…/{migration_id}``), in the managed service's shape, through the
same services as the cluster's Migration page and ``manage.py migration``.

The managed service answers ``id``, ``status`` and ``created_at``; ``databases`` (each migrated
database's tables copied and lag in bytes) and ``error`` are this panel's additions. Unknown fields
in a request are refused (422), so a misspelt option is never silently ignored.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema
from ninja.responses import Status
from pydantic import ConfigDict, Field

from panel.api.models import Scope
from panel.api.v2.common import ERRORS, WRITE_ERRORS, scoped_cluster
from panel.api.v2.errors import ApiError
from panel.migrate.services import actions, cutover

router = Router(tags=["databases"])


class MigrationSourceIn(Schema):
    model_config = ConfigDict(extra="forbid")

    host: str = Field(max_length=255)
    port: int = 5432
    dbname: str = Field(max_length=63)
    username: str = Field(max_length=63)
    password: str = Field(max_length=1024)


class OnlineMigrationIn(Schema):
    model_config = ConfigDict(extra="forbid")

    source: MigrationSourceIn
    disable_ssl: bool = False
    ignore_dbs: list[str] = Field(default_factory=list, max_length=100)


class MigrationDatabaseOut(Schema):
    name: str
    tables_ready: int
    tables: int
    lag_bytes: int | None


class OnlineMigrationOut(Schema):
    id: str
    status: str
    created_at: str
    databases: list[MigrationDatabaseOut] = []
    error: str = ""


def _out(state: cutover.MigrationState) -> dict[str, Any]:
    return {
        "id": state.id,
        "status": state.status,
        "created_at": state.created_at,
        "databases": [
            {"name": db.name, "tables_ready": db.tables_ready, "tables": db.tables, "lag_bytes": db.lag_bytes}
            for db in state.databases
        ],
        "error": state.error,
    }


@router.get(
    "/{uuid:database_id}/online-migration",
    response={200: OnlineMigrationOut, **ERRORS},
    summary="Retrieve the status of the most recent online migration",
)
def get_migration_status(request: HttpRequest, database_id: uuid.UUID) -> dict[str, Any]:
    cluster, _token = scoped_cluster(request, database_id, Scope.READ)
    state = cutover.migration_status(cluster)
    if state is None:
        raise ApiError(404, "No online migration into this database cluster.")
    return _out(state)


@router.put(
    "/{uuid:database_id}/online-migration",
    response={200: OnlineMigrationOut, **WRITE_ERRORS},
    summary="Start an online migration",
)
def update_online_migration(
    request: HttpRequest, database_id: uuid.UUID, payload: OnlineMigrationIn
) -> dict[str, Any]:
    cluster, _token = scoped_cluster(request, database_id, Scope.UPDATE)
    source = payload.source
    migration = actions.start_migration(
        cluster,
        host=source.host,
        port=source.port,
        dbname=source.dbname,
        username=source.username,
        password=source.password,
        disable_ssl=payload.disable_ssl,
        ignore_dbs=payload.ignore_dbs,
    )
    return {
        "id": str(migration.pk),
        "status": migration.status,
        "created_at": migration.created_at.isoformat(),
    }


@router.delete(
    "/{uuid:database_id}/online-migration/{migration_id}",
    response={204: None, **WRITE_ERRORS},
    summary="Stop an online migration (cut over once it is syncing)",
)
def delete_online_migration(request: HttpRequest, database_id: uuid.UUID, migration_id: str) -> Status[None]:
    cluster, _token = scoped_cluster(request, database_id, Scope.UPDATE)
    cutover.stop_migration(cluster, migration_id)
    return Status(204, None)
