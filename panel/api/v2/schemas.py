"""The shapes of the API's responses, as the managed service's v2 databases API has them (and as
the OpenAPI schema documents them)."""

from __future__ import annotations

import datetime as dt
import uuid

from ninja import Schema
from pydantic import Field

from panel.api.v2.managed_schemas import CreateRuleIn, MaintenanceWindow, MetricsEndpoint, RuleOut


class BackupRestoreIn(Schema):
    """Restore another cluster of the caller's (by name) at ``backup_created_at`` (any moment of
    its recovery window; none: the latest point) instead of making an empty one."""

    database_name: str
    backup_created_at: dt.datetime | None = None


class DatabaseCreateIn(Schema):
    """A new cluster, as the managed service's create call sends it (other fields are ignored)."""

    name: str
    engine: str
    version: str | None = None
    region: str | None = None
    size: str
    num_nodes: int = 1
    backup_restore: BackupRestoreIn | None = None
    tags: list[str] | None = Field(None, max_length=50)
    rules: list[CreateRuleIn] | None = Field(None, max_length=100)
    storage_size_mib: int | None = Field(None, ge=0)
    # Accepted as the managed service's clients send them; their meaning here is in docs/managed-api.md.
    project_id: str | None = None
    private_network_uuid: str | None = None


class BackupOut(Schema):
    created_at: dt.datetime
    size_gigabytes: float


class BackupListOut(Schema):
    backups: list[BackupOut]


class Error(Schema):
    id: str
    message: str
    request_id: str


class Host(Schema):
    host: str
    port: int


class Connection(Schema):
    protocol: str
    uri: str
    database: str
    host: str
    port: int
    user: str
    password: str
    ssl: bool
    # A cluster with an entry on several nodes: every entry (its own node's first, as ``host`` and
    # ``port``) and what libpq looks for among them; ``uri`` is then the multi-host form.
    hosts: list[Host] | None = None
    target_session_attrs: str | None = None


class UserSettings(Schema):
    pg_allow_replication: bool = False


class User(Schema):
    name: str
    role: str
    password: str
    settings: UserSettings


class Database(Schema):
    id: uuid.UUID
    name: str
    engine: str
    version: str
    status: str
    size: str
    region: str
    num_nodes: int
    created_at: dt.datetime
    connection: Connection
    # The managed service's other fields (docs/managed-api.md says what each means here).
    private_connection: Connection | None = None
    standby_connection: Connection | None = None
    standby_private_connection: Connection | None = None
    floating_address: str | None = None
    users: list[User] | None = None
    db_names: list[str] | None = None
    tags: list[str] = []
    maintenance_window: MaintenanceWindow | None = None
    semantic_version: str = ""
    version_end_of_life: str | None = None
    version_end_of_availability: str | None = None
    private_network_uuid: str | None = None
    project_id: str | None = None
    rules: list[RuleOut] = []
    storage_size_mib: int | None = None
    metrics_endpoints: list[MetricsEndpoint] = []


class DatabaseOut(Schema):
    database: Database


class Links(Schema):
    pages: dict[str, str]


class Meta(Schema):
    total: int


class DatabaseListOut(Schema):
    databases: list[Database]
    links: Links
    meta: Meta


class Layout(Schema):
    num_nodes: int
    sizes: list[str]


class EngineOptions(Schema):
    regions: list[str]
    versions: list[str]
    layouts: list[Layout]


class VersionAvailability(Schema):
    version: str


class OptionsOut(Schema):
    options: dict[str, EngineOptions]
    version_availability: dict[str, list[VersionAvailability]]


class PoolCreateIn(Schema):
    """A new pool; ``user`` empty or absent = the inbound user (clients log in as themselves)."""

    name: str
    mode: str
    size: int
    db: str
    user: str | None = ""


class PoolUpdateIn(Schema):
    """A pool's new settings, all of them (a full replacement; the name stays)."""

    mode: str
    size: int
    db: str
    user: str | None = ""


class Pool(Schema):
    name: str
    mode: str
    size: int
    db: str
    user: str
    connection: Connection


class PoolOut(Schema):
    pool: Pool


class PoolListOut(Schema):
    pools: list[Pool]
    links: Links
    meta: Meta


class UserCreateIn(Schema):
    name: str
    settings: UserSettings | None = None


class UserUpdateIn(Schema):
    settings: UserSettings


class UserOut(Schema):
    user: User


class UserListOut(Schema):
    users: list[User]
    links: Links
    meta: Meta


class DbIn(Schema):
    name: str


class Db(Schema):
    name: str


class DbOut(Schema):
    db: Db


class DbListOut(Schema):
    dbs: list[Db]
    links: Links
    meta: Meta


class Ca(Schema):
    certificate: str


class CaOut(Schema):
    ca: Ca


class Event(Schema):
    id: str
    cluster_name: str
    event_type: str
    create_time: dt.datetime
    level: str
    message: str


class EventListOut(Schema):
    events: list[Event]
    links: Links
    meta: Meta
