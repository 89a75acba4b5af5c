"""Forwarding: each round, every sink of every cluster on this node gets the log entries written
since its cursors, as the Logs tab reads them (``panel.logs.services.read_log``: the panel's own
sessions left out, secrets redacted), with the cluster's name as the host.

A sink reads only its own cluster's logs, so no record of one cluster reaches another's sink.
A sink that does not take the records keeps its cursors (it gets them again once it answers,
within what one read holds) and shows why on the Logs tab's card; the local logs are only read,
never changed.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import time
from typing import Any

from django.conf import settings
from django.utils import timezone

from panel.clusters.models import Cluster
from panel.core.agent import on_node
from panel.core.errors import N_, Message, ServiceError
from panel.env import env_int
from panel.logs import services as logs
from panel.logsink.lib import config as sink_config
from panel.logsink.lib import formats
from panel.logsink.models import LogSink
from panel.logsink.services import destination, transport

log = logging.getLogger(__name__)

APPS = {logs.POSTGRES: "postgresql", logs.POOLER: "pgbouncer"}
BATCH = logs.MAX_ENTRIES
# A failing sink is tried once a minute, not every round.
FAILING_BACKOFF_SECONDS = 60.0
# How long a sink may take to answer.
SINK_TIMEOUT = env_int("PANEL_LOGSINK_TIMEOUT", 5, minimum=1)


def record(cluster: Cluster, source: str, entry: Any) -> formats.Record:
    """A Logs-tab entry as a record: its fields by name, the message with its detail lines."""
    lines = [str(getattr(entry, "message", "") or "")]
    lines += [str(line) for line in getattr(entry, "details", []) or []]
    return formats.Record(
        timestamp=str(getattr(entry, "timestamp", "") or ""),
        host=cluster.name,
        app=APPS[source],
        pid=str(getattr(entry, "pid", "") or ""),
        level=str(getattr(entry, "level", "") or ""),
        user=str(getattr(entry, "user", "") or ""),
        database=str(getattr(entry, "database", "") or ""),
        message="\n".join(line for line in lines if line),
    )


def _collect(sink: LogSink) -> tuple[list[formats.Record], dict[str, str], int]:
    """The records since the sink's cursors, oldest first, the cursors after them, and how many
    entries were left out because more were written than one read holds."""
    cluster = sink.cluster
    records: list[formats.Record] = []
    cursors = dict(sink.cursors)
    skipped = 0
    for source in logs.SOURCES:
        try:
            if source not in cursors:
                # A new sink starts at the end: it gets what is written from now on.
                cursors[source] = logs.read_log(cluster, source, limit=1).cursor
                continue
            page = logs.read_log(cluster, source, limit=BATCH, after=cursors[source])
        except ServiceError as exc:
            log.info("logsink %s: %s not read: %s", sink.pk, source, exc.message)
            continue
        records += [record(cluster, source, entry) for entry in reversed(page.entries)]
        skipped += int(page.more_entries)
        cursors[source] = page.cursor or cursors[source]
    return records, cursors, skipped


def deliver(sink: LogSink, records: list[formats.Record]) -> None:
    """Send ``records`` to ``sink``; SinkUnreachable or ServiceError when it did not take them."""
    config = sink.config
    host, port, _tls = sink_config.destination(sink.sink_type, config)
    address = destination.checked_address(host, port)
    timeout = float(SINK_TIMEOUT)
    if sink.sink_type == sink_config.RSYSLOG:
        frames = [
            formats.octet_frame(
                formats.syslog_line(r, config["format"], logline=config.get("logline"), sd=config.get("sd"))
            )
            for r in records
        ]
        transport.send_syslog(address, config, frames, timeout)
    else:
        body = formats.bulk_body(records, config["index_prefix"], dt.datetime.now(dt.UTC).date())
        transport.send_bulk(address, config, body, max(timeout, float(config.get("timeout", timeout))))


def forward_sink(sink: LogSink) -> int:
    """One round for one sink: how many records it took (0 when it failed; the card says why)."""
    records, cursors, skipped = _collect(sink)
    if not records:
        sink.sent(0, cursors, skipped)
        return 0
    try:
        deliver(sink, records)
    except (transport.SinkUnreachable, ServiceError) as exc:
        if isinstance(exc, ServiceError):
            reason = Message(exc.template, exc.code, **(exc.params or {}))
        else:
            reason = exc.message
        log.warning("logsink %s of %s failed: %s", sink.name, sink.cluster.name, reason)
        sink.failed(reason)
        return 0
    sink.sent(len(records), cursors, skipped)
    if sink.sink_type != sink_config.RSYSLOG:
        expire_indices(sink)
    return len(records)


def expire_indices(sink: LogSink) -> list[str]:
    """Once a day, remove the sink's daily indices older than its ``index_days_max``; a failure
    here is logged and tried again the next day (the records themselves were delivered)."""
    today = dt.datetime.now(dt.UTC).date()
    if sink.indices_expired_on == today:
        return []
    config = sink.config
    host, port, _tls = sink_config.destination(sink.sink_type, config)
    timeout = float(SINK_TIMEOUT)
    removed: list[str] = []
    try:
        address = destination.checked_address(host, port)
        names = transport.index_names(address, config, timeout)
        for name in formats.expired_indices(
            names, config["index_prefix"], today, int(config["index_days_max"])
        ):
            transport.delete_index(address, config, name, timeout)
            removed.append(name)
    except (transport.SinkUnreachable, ServiceError) as exc:
        log.warning("logsink %s: old indices not removed: %s", sink.pk, exc)
    LogSink.objects.filter(pk=sink.pk).update(indices_expired_on=today)
    return removed


@on_node(timeout=60)
def forward_cluster(cluster: Cluster, deadline: float | None = None) -> int:
    """Forward ``cluster``'s new entries to each of its sinks that is due; the records sent.
    Sinks left when ``deadline`` (time.monotonic) has passed wait for the next round."""
    if not cluster.is_local or not cluster.is_serving:
        return 0
    now = timezone.now()
    sent = 0
    for sink in LogSink.objects.filter(cluster=cluster).select_related("cluster"):
        if deadline is not None and time.monotonic() > deadline:
            break
        if not sink.due(now, FAILING_BACKOFF_SECONDS):
            continue
        try:
            sent += forward_sink(sink)
        except Exception:  # one sink's surprise must not stop the others' forwarding
            log.exception("logsink %s of %s crashed", sink.pk, cluster.name)
            sink.failed(Message(N_("Forwarding failed unexpectedly; the panel's log says why.")))
    return sent


def forward_round() -> int:
    """The periodic round on this node (beat's fan-out): every cluster here that has a sink,
    in a new order each round, within one interval: a tenant whose sinks hang delays nobody
    else's for long, and the node's worker is free again for its other work."""
    clusters = list(Cluster.objects.here().filter(log_sinks__isnull=False).distinct())
    random.shuffle(clusters)
    deadline = time.monotonic() + settings.PANEL_LOGSINK_SECONDS
    return sum(forward_cluster(cluster, deadline) for cluster in clusters if time.monotonic() <= deadline)
