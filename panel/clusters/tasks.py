"""Celery tasks: thin wrappers that carry a cluster id and call the service."""

from __future__ import annotations

import logging
import threading
from typing import Any

from celery import shared_task
from celery.signals import worker_ready, worker_shutdown
from django.conf import settings
from django.db import connection

from panel.clusters import services
from panel.clusters.models import Cluster, ClusterStatus, Node
from panel.clusters.replicas.services import replica_build
from panel.clusters.services import nodes, reconciler
from panel.clusters.services import resize as resize_service
from panel.clusters.standbys.services import ha, member_count
from panel.core import taskqueue
from panel.core.errors import ServiceError

log = logging.getLogger(__name__)


@shared_task(name="panel.clusters.tasks.provision")
def provision(cluster_id: str) -> None:
    services.provision_cluster(cluster_id)


@shared_task(name="panel.clusters.tasks.build_replica")
def build_replica(replica_id: str) -> None:
    replica_build.build_replica(replica_id)


@shared_task(name="panel.clusters.tasks.cluster_action")
def cluster_action(cluster_id: str, action: str) -> None:
    try:
        cluster = Cluster.objects.get(pk=cluster_id)
    except Cluster.DoesNotExist:
        return
    try:
        services.perform_action(cluster, action)
    except ServiceError as exc:
        log.warning("%s of %s failed: %s", action, cluster_id, exc.message)


@shared_task(name="panel.clusters.tasks.resize")
def resize(cluster_id: str, plan_slug: str) -> None:
    resize_service.perform_resize(cluster_id, plan_slug)


@shared_task(name="panel.clusters.tasks.member_count")
def change_member_count(cluster_id: str, num_nodes: int) -> None:
    member_count.perform_member_count(cluster_id, num_nodes)


@shared_task(name="panel.clusters.tasks.delete")
def delete(cluster_id: str) -> None:
    services.delete_queued(cluster_id)


@shared_task(name="panel.clusters.tasks.reconcile")
def reconcile() -> list[str]:
    notes = reconciler.reconcile()
    for note in notes:
        log.info("reconciler: %s", note)
    return notes


@shared_task(name="panel.clusters.tasks.fan_out", ignore_result=True)
def fan_out(task_name: str, expires: float, kind: str = "tasks") -> list[str]:
    """Beat's periodic work, one message per node whose agent is alive, on the node's tasks
    queue: each node reconciles, collects and reaps its own clusters (``Cluster.objects.here``).
    ``kind`` "work": on the node's queue of tenants' long work instead (log forwarding, whose
    destinations are the tenants' and may be slow)."""
    if kind not in ("tasks", "work"):
        raise ValueError(f"no queue of kind {kind!r}")
    sent = []
    for node in Node.objects.all():
        if node.is_alive:
            queue = node.work_queue if kind == "work" else node.tasks_queue
            taskqueue.send(task_name, [], queue=queue, expires=expires)
            sent.append(node.name)
    return sent


@worker_ready.connect
def _at_start(sender: Any = None, **_kwargs: Any) -> None:
    """A node worker reconciles its node's clusters at once (after a reboot they come back
    before beat's first round); the agent (role "agent") registers its node and beats."""
    consuming = set(sender.app.amqp.queues.consume_from) if sender is not None else set()
    if settings.PANEL_PROCESS_ROLE == "agent":
        try:
            nodes.register_this_node()
            _Heartbeat.registered = True
        except Exception:  # a busy database at start: the heartbeat thread registers it later
            log.exception("node registration failed; the heartbeat thread tries again")
        finally:
            connection.close()
        _Heartbeat.start()
        _MemberWatch.start()
    own = f"node.{settings.PANEL_NODE_NAME}.tasks"
    if own in consuming:
        reconcile.apply_async(queue=own)


@worker_shutdown.connect
def _at_stop(**_kwargs: Any) -> None:
    _Heartbeat.stop()
    _MemberWatch.stop()


# Beats between two looks at the installed PostgreSQL versions (30 × 10 s: five minutes).
INVENTORY_EVERY = 30


class _Background:
    """A daemon thread of the agent that wakes every few seconds until ``stop``; each subclass
    keeps its own event and thread, and names its loop ``_loop``."""

    _stop: threading.Event
    _thread: threading.Thread | None
    thread_name = ""

    @classmethod
    def start(cls) -> None:
        if cls._thread is not None:
            return
        cls._stop.clear()
        cls._thread = threading.Thread(target=cls._loop, name=cls.thread_name, daemon=True)
        cls._thread.start()

    @classmethod
    def stop(cls) -> None:
        cls._stop.set()

    @classmethod
    def _loop(cls) -> None:
        raise NotImplementedError


class _Heartbeat(_Background):
    """The agent's heartbeat thread: its node's last_heartbeat every PANEL_NODE_HEARTBEAT_SECONDS."""

    _stop = threading.Event()
    _thread: threading.Thread | None = None
    thread_name = "node-heartbeat"
    # Whether this agent registered its node (at start, or at its first beat after a failure
    # there); a row gone after that was removed by an operator and is not made again.
    registered = False

    @classmethod
    def _loop(cls) -> None:
        warned = False
        beats = 0
        while not cls._stop.wait(settings.PANEL_NODE_HEARTBEAT_SECONDS):
            beats += 1
            try:
                # The installed versions again every INVENTORY_EVERY beats (registering took them).
                found = nodes.heartbeat(inventory=beats % INVENTORY_EVERY == 0)
                if not found and not cls.registered:  # registration failed at start: once more
                    nodes.register_this_node()
                    cls.registered = found = True
                if not found and not warned:
                    log.warning(
                        "node %s has no row (removed with manage.py node remove?): this agent's "
                        "heartbeats go nowhere; restart it to register the node again",
                        settings.PANEL_NODE_NAME,
                    )
                warned = not found
            except Exception:  # a database hiccup must not end the heartbeats for good
                log.exception("node heartbeat failed")
            finally:
                connection.close()


class _MemberWatch(_Background):
    """The agent's look at the members of its clusters with standbys, every
    PANEL_MEMBER_WATCH_SECONDS: their rows, and after a failover PgBouncer repointed, the event
    and the owner's email (Patroni's callback repoints PgBouncer first; this is the backup)."""

    _stop = threading.Event()
    _thread: threading.Thread | None = None
    thread_name = "member-watch"

    @classmethod
    def _loop(cls) -> None:
        while not cls._stop.wait(settings.PANEL_MEMBER_WATCH_SECONDS):
            try:
                for cluster in Cluster.objects.here().filter(
                    num_nodes__gt=1, status__in=ClusterStatus.SERVING
                ):
                    ha.refresh_members(cluster)
            except Exception:  # a database hiccup must not end the watch for good
                log.exception("member watch failed")
            finally:
                connection.close()
