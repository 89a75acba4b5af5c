"""The shapes of the API's responses, as the managed service's v2 databases API has them (and as
the OpenAPI schema documents them)."""

from __future__ import annotations

import datetime as dt
import uuid

from ninja import Schema


class DatabaseCreateIn(Schema):
    """A new cluster, as the managed service's create call sends it (other fields are ignored)."""

    name: str
    engine: str
    version: str | None = None
    region: str | None = None
    size: str
    num_nodes: int = 1


class Error(Schema):
    id: str
    message: str
    request_id: str


class Connection(Schema):
    protocol: str
    uri: str
    database: str
    host: str
    port: int
    user: str
    password: str
    ssl: bool


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
