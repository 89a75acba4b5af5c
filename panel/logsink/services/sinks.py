"""One function per user action on a cluster's log sinks (the Logs tab's card and the API's five
logsink operations call the same ones). Every value is checked, and the destination's address
too, before anything is saved: a refusal changes nothing."""

from __future__ import annotations

import uuid
from typing import Any

from django.db import IntegrityError, transaction

from panel.clusters.face import transitions
from panel.clusters.models import Cluster
from panel.core.errors import N_, Message, ServiceError
from panel.logsink.lib import config as sink_config
from panel.logsink.lib.config import InvalidSink
from panel.logsink.models import LogSink
from panel.logsink.services import destination

MAX_SINKS = 10


def _checked(sink_type: Any, config: Any) -> dict[str, Any]:
    try:
        normal = sink_config.check(sink_type, config)
    except InvalidSink as exc:
        raise ServiceError.of(exc) from None
    host, port, _tls = sink_config.destination(str(sink_type), normal)
    destination.checked_address(host, port, field="server" if sink_type == sink_config.RSYSLOG else "url")
    return normal


def _require_local(cluster: Cluster) -> None:
    if not cluster.is_local:
        raise ServiceError(
            N_(
                "The panel forwards the logs of the clusters it runs; an attached server keeps its log where it runs."
            ),
            code="logsink.attached_unsupported",
            params={},
        )


def create_sink(cluster: Cluster, *, name: Any, sink_type: Any, config: Any) -> LogSink:
    _require_local(cluster)
    try:
        sink_config.check_name(name)
    except InvalidSink as exc:
        raise ServiceError.of(exc) from None
    normal = _checked(sink_type, config)
    if cluster.log_sinks.count() >= MAX_SINKS:
        raise ServiceError(
            N_("A cluster has at most %(max)s log sinks."), code="logsink.too_many", params={"max": MAX_SINKS}
        )
    sink = LogSink(cluster=cluster, name=name, sink_type=sink_type)
    sink.config = normal
    try:
        with transaction.atomic():
            sink.save()
            transitions.log_event(
                cluster, "logsink-added", Message(N_("Log sink “%(name)s” added."), name=name)
            )
    except IntegrityError:
        raise ServiceError(
            N_("A log sink named “%(name)s” already exists."),
            field="sink_name",
            code="logsink.name_taken",
            params={"name": name},
        ) from None
    return sink


def get_sink(cluster: Cluster, sink_id: Any) -> LogSink:
    try:
        sink = cluster.log_sinks.filter(pk=uuid.UUID(str(sink_id))).first()
    except ValueError:  # an id that is no UUID: as one that is not there
        sink = None
    if sink is None:
        raise ServiceError(N_("No log sink with that id."), code="logsink.not_found", params={})
    return sink


def update_sink(cluster: Cluster, sink_id: Any, *, config: Any) -> LogSink:
    """A full replacement of the sink's configuration (its type and name stay)."""
    sink = get_sink(cluster, sink_id)
    normal = _checked(sink.sink_type, config)
    sink.config = normal
    if sink_config.destination(sink.sink_type, normal) != sink_config.destination(
        sink.sink_type, sink.config
    ):
        sink.cursors = {}
    sink.last_error, sink.failing_since = "", None
    sink.save(update_fields=["config_encrypted", "cursors", "last_error", "failing_since"])
    return sink


def delete_sink(cluster: Cluster, sink_id: Any) -> None:
    sink = get_sink(cluster, sink_id)
    sink.delete()
    transitions.log_event(
        cluster, "logsink-removed", Message(N_("Log sink “%(name)s” removed."), name=sink.name)
    )
