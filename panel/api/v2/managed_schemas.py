"""Shapes of the managed service's extras (maintenance window, metrics credentials, autoscale,
the cluster object's added fields), as the v2 OpenAPI has them. Request bodies refuse unknown
fields: a misspelt setting is an error, never silently ignored."""

from __future__ import annotations

from ninja import Schema
from pydantic import ConfigDict, Field


class Strict(Schema):
    model_config = ConfigDict(extra="forbid")


class MaintenanceWindow(Schema):
    day: str
    hour: str
    pending: bool
    description: list[str]


class MaintenanceWindowIn(Strict):
    day: str = Field(max_length=16)
    hour: str = Field(max_length=8)
    # What GET answered may be sent back: the managed service lists them as optional inputs.
    pending: bool | None = None
    description: list[str] | None = None


class MetricsEndpoint(Schema):
    host: str
    port: int


class MetricsAuth(Schema):
    basic_auth_username: str
    basic_auth_password: str


class MetricsCredentialsInner(Schema):
    credentials: MetricsAuth


class MetricsCredentialsOut(Schema):
    credentials: MetricsCredentialsInner


class MetricsAuthIn(Strict):
    basic_auth_username: str | None = Field(None, max_length=64)
    basic_auth_password: str | None = Field(None, max_length=128)


class MetricsCredentialsIn(Strict):
    credentials: MetricsAuthIn


class StorageAutoscale(Schema):
    enabled: bool
    threshold_percent: int
    increment_gib: int


class AutoscaleInner(Schema):
    storage: StorageAutoscale


class AutoscaleOut(Schema):
    autoscale: AutoscaleInner


class StorageAutoscaleIn(Strict):
    enabled: bool
    threshold_percent: int | None = Field(None, ge=1, le=99)
    increment_gib: int | None = Field(None, ge=1, le=10240)


class AutoscaleIn(Strict):
    storage: StorageAutoscaleIn


class RuleOut(Schema):
    uuid: str
    cluster_uuid: str
    type: str
    value: str
    created_at: str


class CreateRuleIn(Schema):
    type: str = Field(max_length=16)
    value: str = Field(max_length=64)
