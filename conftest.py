"""Shared fixtures: three personas, and real Redis, Celery and PostgreSQL started on loopback."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import redis
from django.contrib.auth.models import User
from django.test import Client
from kombu.serialization import loads as kombu_loads

from panel.clusters import services
from panel.clusters.models import Cluster

ROOT = Path(__file__).resolve().parent
DEFAULT_TEST_PORT_RANGE = (26000, 26999)
PORT_WINDOW = 200


@pytest.fixture(scope="session", autouse=True)
def _private_port_window() -> None:
    """Give this test session its own slice of the test port range.

    Several sessions (engineers, CI jobs) run on one machine at once; each starts from the lowest
    free port, so two of them would pick the same port between checking it and PostgreSQL
    binding it. A random window makes that race unlikely. An explicit PANEL_PORT_RANGE is kept.
    """
    from django.conf import settings

    if tuple(settings.PANEL_PORT_RANGE) != DEFAULT_TEST_PORT_RANGE:
        return
    first, last = DEFAULT_TEST_PORT_RANGE
    start = first + 2 * random.SystemRandom().randrange((last - first + 1 - PORT_WINDOW) // 2 + 1)
    settings.PANEL_PORT_RANGE = (start, start + PORT_WINDOW - 1)
    os.environ["PANEL_PORT_RANGE"] = f"{start}-{start + PORT_WINDOW - 1}"  # for the Celery worker


@pytest.fixture(autouse=True)
def _english() -> None:
    """Every test starts in English: a request in German (the language menu, Accept-Language)
    leaves its language active in the thread, and a refusal read later would be in German."""
    from django.utils import translation

    translation.activate("en")


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    """Counters kept in Django's cache (the attach rate limit, per account id) start from zero in
    every test: ids are reused from one test to the next."""
    from django.core.cache import cache

    cache.clear()


@pytest.fixture
def owner(db: None) -> User:
    return User.objects.create_user("alice", "alice@example.com", "alice-password-1")


@pytest.fixture
def other_user(db: None) -> User:
    """Somebody with an account who does not own the clusters under test: gets 404s."""
    return User.objects.create_user("bob", "bob@example.com", "bob-password-1")


@pytest.fixture
def staff_user(db: None) -> User:
    return User.objects.create_user("carol", "carol@example.com", "carol-password-1", is_staff=True)


@pytest.fixture
def owner_client(owner: User) -> Client:
    client = Client()
    client.force_login(owner)
    return client


@pytest.fixture
def other_client(other_user: User) -> Client:
    client = Client()
    client.force_login(other_user)
    return client


@pytest.fixture(scope="session")
def redis_server() -> Iterator[str]:
    """A private redis-server on the port panel.testenv chose (Debian's package starts none)."""
    port = int(os.environ["PANEL_TEST_REDIS_PORT"])
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.fail("redis-server is not installed; run `make test`, which installs it")
    proc = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                proc.kill()
                pytest.fail("redis-server did not answer within 10 s")
            time.sleep(0.05)
    yield f"redis://127.0.0.1:{port}/0"
    proc.terminate()
    proc.wait(timeout=10)


@pytest.hookimpl(trylast=True)  # header lines come out in reverse call order: this one first
def pytest_report_header(config: pytest.Config) -> str:
    """Which metadata database this run uses, at the top of the log (make test / make test-pg)."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    if db["ENGINE"] == "django.db.backends.sqlite3":
        return f"metadata: SQLite, test database {db['TEST']['NAME']}"
    return f"metadata: PostgreSQL at {db['HOST']}:{db['PORT']}, test database test_{db['NAME']}"


def worker_database_url() -> str:
    """DATABASE_URL of the test database pytest-django set up, for the processes the tests start
    that must share it (Celery workers): the SQLite file, or test_<name> on the PostgreSQL server."""
    from django.conf import settings
    from django.db import connection

    if connection.vendor == "sqlite":
        return f"sqlite:///{settings.DATABASES['default']['TEST']['NAME']}"
    name = connection.settings_dict["NAME"]
    # Before the test database is set up NAME is the server's own database: never hand that out.
    assert name.startswith("test_"), f"the test database is not set up yet ({name})"
    return urlsplit(os.environ["PANEL_TEST_DATABASE_URL"])._replace(path=f"/{name}").geturl()


def worker_env(redis_url: str, **extra: str) -> dict[str, str]:
    """The environment of a process the tests start that works like a worker: the test database,
    the test Redis (and ``extra``, e.g. a node of its own)."""
    return dict(
        os.environ, DATABASE_URL=worker_database_url(), REDIS_URL=redis_url, PANEL_TEST_WORKER="1", **extra
    )


def start_celery_worker(
    redis_url: str, queues: str, log_path: Path, *, concurrency: int = 2, **extra: str
) -> subprocess.Popen[bytes]:
    """A real Celery worker process in its own session, sharing the test database and the data
    directory (``extra``: more of its environment); returns once it says it is ready (or fails
    the test with its log)."""
    env = worker_env(redis_url, **extra)
    command = [sys.executable, "-m", "celery", "-A", "panel", "worker", "-Q", queues]
    command += ["--concurrency", str(concurrency), "--loglevel", "INFO"]
    command += ["--without-heartbeat", "--without-gossip", "--without-mingle"]
    with open(log_path, "wb") as log_file:
        proc = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True
        )
    deadline = time.monotonic() + 60
    while "ready." not in log_path.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"Celery worker did not start:\n{log_path.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)
    return proc


def start_node_agent(redis_url: str, log_path: Path) -> subprocess.Popen[bytes]:
    """This node's agent as make run starts it: a worker of role "agent" on the node's calls queue,
    which registers the node and beats every PANEL_NODE_HEARTBEAT_SECONDS, so a test acting as the
    web may call it however long the test takes (a heartbeat written once by the test goes stale
    after PANEL_NODE_DEAD_AFTER, and the web then refuses to call). Returns once its first beat is
    in the database (or fails the test with its log)."""
    from django.conf import settings
    from django.utils import timezone

    from panel.clusters.models import Node

    started = timezone.now()
    name = settings.PANEL_NODE_NAME
    # Beats every 2 s: a registration that met a busy database at start is retried that soon.
    proc = start_celery_worker(
        redis_url, f"node.{name}", log_path, PANEL_PROCESS_ROLE="agent", PANEL_NODE_HEARTBEAT_SECONDS="2"
    )
    deadline = time.monotonic() + 60
    while True:
        beat = Node.objects.filter(name=name).values_list("last_heartbeat", flat=True).first()
        if beat is not None and beat >= started:
            return proc
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()  # no teardown runs for a fixture that fails before its yield
            proc.wait()
            pytest.fail(
                f"the agent sent no heartbeat within 60 s:\n{log_path.read_text(errors='replace')[-3000:]}"
            )
        time.sleep(0.2)


@pytest.fixture(scope="session")
def celery_worker(redis_server: str, django_db_setup: None, django_db_blocker: object) -> Iterator[None]:
    """The session's worker: this node's tasks queue and beat's default one."""
    from django.conf import settings

    proc = start_celery_worker(
        redis_server,
        f"default,node.{settings.PANEL_NODE_NAME}.tasks,node.{settings.PANEL_NODE_NAME}.work,"
        f"node.{settings.PANEL_NODE_NAME}.backups",
        Path(settings.PANEL_DATA_DIR) / "celery-worker.log",
    )
    yield
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


def _port_answers(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _reset_celery_pools(app: object) -> None:
    # Celery caches its connection and producer pools per broker URL on first use.
    app._pool = None  # type: ignore[attr-defined]
    app.amqp._producer_pool = None  # type: ignore[attr-defined]


@pytest.fixture
def redis_down(settings: object) -> Iterator[str]:
    """The task queue is unreachable: nothing listens on the broker's port during the test.

    Without ``redis_server`` the test REDIS_URL port has nothing behind it; if an earlier test
    started that session-wide server, Celery is pointed at another, unused port for this test.
    """
    from panel.celery import app

    url = settings.REDIS_URL  # type: ignore[attr-defined]
    port = urlsplit(url).port
    assert port is not None
    if _port_answers(port):
        port = _unused_port()
        url = f"redis://127.0.0.1:{port}/0"
    assert not _port_answers(port), f"something listens on the test broker port {port}"
    previous = app.conf.broker_url
    app.conf.broker_url = url
    settings.REDIS_URL = url  # type: ignore[attr-defined]
    settings.CELERY_BROKER_URL = url  # type: ignore[attr-defined]
    _reset_celery_pools(app)
    yield url
    app.conf.broker_url = previous
    _reset_celery_pools(app)


# A database of the private Redis no worker listens on: tasks sent there stay to be read.
QUIET_REDIS_DB = 15


@pytest.fixture
def queued_tasks(redis_server: str, settings: object) -> Iterator[Callable[[str], list[tuple[str, list]]]]:
    """Celery sends to a real Redis that no worker reads; returns ``queued(queue)``: the
    ``(task name, args)`` of the messages waiting on that queue, in the order they were sent."""
    from panel.celery import app

    url = redis_server.rsplit("/", 1)[0] + f"/{QUIET_REDIS_DB}"
    client = redis.Redis.from_url(url)
    client.flushdb()
    previous = app.conf.broker_url
    app.conf.broker_url = url
    settings.REDIS_URL = url  # type: ignore[attr-defined]
    settings.CELERY_BROKER_URL = url  # type: ignore[attr-defined]
    _reset_celery_pools(app)

    def queued(queue: str) -> list[tuple[str, list]]:
        found = []
        for raw in reversed(client.lrange(queue, 0, -1)):  # kombu LPUSHes; workers pop the right
            message = json.loads(raw)
            # Signed by the panel's key (Celery's auth serializer): verified as a worker would.
            body = base64.b64decode(message["body"])
            args, _kwargs, _embed = kombu_loads(
                body, message["content-type"], message["content-encoding"], accept=["auth"]
            )
            found.append((message["headers"]["task"], args))
        return found

    yield queued
    app.conf.broker_url = previous
    _reset_celery_pools(app)
    client.flushdb()
    client.close()


@pytest.fixture
def wait_until() -> Callable[..., object]:
    """Poll ``predicate`` until it returns something truthy; fail with ``message`` after ``timeout``."""

    def wait(predicate: Callable[[], object], *, timeout: float = 30, message: str = "") -> object:
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() > deadline:
                pytest.fail(f"timed out after {timeout:.0f} s: {message or predicate}")
            time.sleep(0.1)

    return wait


def make_local_cluster(owner: User, name: str = "db-test", plan: str = "db-s-1vcpu-1gb") -> Cluster:
    cluster = services.create_cluster(owner, name=name, plan_slug=plan, enqueue=False)
    cluster = services.provision_cluster(cluster.pk)
    assert cluster.status == "online", cluster.error_message
    return cluster


@contextlib.contextmanager
def module_cluster(
    django_db_blocker: object,
    username: str,
    name: str,
    plan: str = "db-s-1vcpu-1gb",
    *,
    num_nodes: int = 1,
) -> Iterator[Cluster]:
    """A real cluster that one module's tests share, owned by a user of its own; removed afterwards.

    For a module-scoped fixture (``django_db_blocker`` lets it write rows outside a test). When a
    transactional test of another module flushed the rows meanwhile, the server is stopped and
    its files removed instead. ``num_nodes`` above 1: members run by Patroni (and etcd), which
    all run as the cluster's user: without the rows its leftover processes go, and the user.
    """
    from panel.clusters import hooks
    from panel.clusters.engine import isolation, patroni, postgres
    from panel.clusters.services import ha

    with django_db_blocker.unblock():  # type: ignore[attr-defined]
        owner = User.objects.create_user(username, f"{username}@example.com", f"{username}-password-1")
        made = services.create_cluster(owner, name=name, plan_slug=plan, num_nodes=num_nodes, enqueue=False)
        cluster = services.provision_cluster(made.pk)
    try:
        assert cluster.status == "online", cluster.error_message
        yield cluster
    finally:
        with django_db_blocker.unblock():  # type: ignore[attr-defined]
            if Cluster.objects.filter(pk=cluster.pk).exists():
                delete_replicas_of(cluster)
                services.delete_cluster(Cluster.objects.get(pk=cluster.pk), confirm_name=cluster.name)
            elif num_nodes > 1:
                isolation.kill_leftover_processes(cluster)
                patroni.stop_etcd(ha.etcd_data_dir())
                postgres.remove_data(cluster.data_root)
                isolation.remove_cluster_user(cluster)
            else:  # its PgBouncer too: the teardown that would stop it cannot run without the rows
                hooks.pooler.stop_pgbouncer(cluster)
                postgres.kill(cluster.pgdata)
                postgres.remove_data(cluster.data_root)
            User.objects.filter(username=username).delete()


class SharedCluster:
    """A real cluster that a module's transactional tests share (one initdb, one teardown), and
    the rows that describe it, put back before each test when a flush removed them.

    ``TransactionTestCase`` empties every table after each test; the server, its files and its
    system user stay. The rows (the cluster, its users, databases, events and whatever else
    cascades from it, and its node) are kept as serialised copies and saved again with the same
    primary keys, owned by the test's ``owner``. What a test changes on the server itself is the
    module's to undo (its ``cluster`` fixture): a module only shares when its tests leave the
    server as they found it (running, the same roles).
    """

    def __init__(self, cluster: Cluster) -> None:
        from django.contrib.admin.utils import NestedObjects
        from django.core import serializers

        self.pk = cluster.pk
        collector = NestedObjects(using="default")
        collector.collect([cluster])
        rows = [cluster.node] if cluster.node is not None else []
        rows += [row for model_rows in collector.data.values() for row in model_rows]
        self._rows = serializers.serialize("python", rows)

    def restore(self, owner: User) -> Cluster:
        """The cluster's rows as provisioning left them (if a flush took them), owned by ``owner``."""
        from django.core import serializers

        from panel.clusters.models import Node

        if not Cluster.objects.filter(pk=self.pk).exists():
            node_id = None
            for row in sorted(serializers.deserialize("python", self._rows), key=self._parents_first):
                if isinstance(row.object, Node):
                    # A test may have registered this node again (a new row) before: keep that one.
                    existing = Node.objects.filter(name=row.object.name).first()
                    if existing is not None:
                        node_id = existing.pk
                        continue
                if isinstance(row.object, Cluster):
                    row.object.owner_id = owner.pk
                if node_id is not None and hasattr(row.object, "node_id"):  # the cluster, its members
                    row.object.node_id = node_id
                row.save()
        Cluster.objects.filter(pk=self.pk).update(owner=owner)
        return Cluster.objects.get(pk=self.pk)

    @staticmethod
    def _parents_first(row: object) -> int:
        from panel.clusters.models import Node

        obj = row.object  # type: ignore[attr-defined]
        return 0 if isinstance(obj, Node) else 1 if isinstance(obj, Cluster) else 2


@pytest.fixture(scope="module")
def _module_local_cluster(django_db_setup: None, django_db_blocker: object) -> Iterator[SharedCluster]:
    """The server behind ``shared_local_cluster``: made once per module, deleted after it."""
    with django_db_blocker.unblock():  # type: ignore[attr-defined]
        maker = User.objects.create_user("shared-owner", "shared@example.com", "shared-password-1")
        shared = SharedCluster(make_local_cluster(maker))
    try:
        yield shared
    finally:
        with django_db_blocker.unblock():  # type: ignore[attr-defined]
            owner = User.objects.filter(username="shared-owner").first()
            owner = owner or User.objects.create_user("shared-owner", "shared@example.com")
            cluster = shared.restore(owner)
            delete_replicas_of(cluster)
            services.delete_cluster(cluster, confirm_name=cluster.name)
            User.objects.filter(username="shared-owner").delete()


@pytest.fixture
def shared_local_cluster(
    owner: User, transactional_db: None, _module_local_cluster: SharedCluster
) -> Iterator[Cluster]:
    """``local_cluster`` for a module whose tests leave the server as they found it: one real
    cluster for the whole module (a provisioning saved per test), its rows back before each test.
    A server a test stopped (through the panel or behind its back) is started again after it."""
    cluster = _module_local_cluster.restore(owner)
    assert cluster.status == "online" and postgres_is_running(cluster), cluster.status
    yield cluster
    if not postgres_is_running(cluster) and Cluster.objects.filter(pk=cluster.pk).exists():
        from django.conf import settings

        from panel.clusters.engine import isolation

        isolation.start_server(cluster, cluster.os_user(), settings.PANEL_COMMAND_TIMEOUT)


HA_PAIR_OWNER = "ha-pair-owner"


class HaPair:
    """The session's two-member cluster (``ha_pair``), built by the first loan. Between loans its
    rows are kept as serialised copies (a loan's owner, and what cascades from it, is deleted
    after it) and its pooler port is held by a socket of this process, so that no cluster made
    meanwhile is given it (nothing listens there until a loan makes a pool, and the rows that
    said it was taken are gone). A build that fails leaves nothing: the next loan tries again."""

    def __init__(self) -> None:
        self.shared: SharedCluster | None = None
        self.pooler_port = 0
        self._held: socket.socket | None = None

    def build(self, django_db_blocker: object) -> SharedCluster:
        from panel.clusters.services import ha

        if self.shared is not None:
            return self.shared
        with django_db_blocker.unblock():  # type: ignore[attr-defined]
            maker = User.objects.create_user(
                HA_PAIR_OWNER, f"{HA_PAIR_OWNER}@example.com", "ha-pair-password-1"
            )
            made = None
            try:
                made = services.create_cluster(
                    maker, name="db-ha-pair", plan_slug="db-s-1vcpu-2gb", num_nodes=2, enqueue=False
                )
                cluster = services.provision_cluster(made.pk)
                assert cluster.status == "online", cluster.error_message
                assert ha.wait_healthy(cluster, 90), ha.read_statuses(cluster)
            except BaseException:
                if made is not None and Cluster.objects.filter(pk=made.pk).exists():
                    services.delete_cluster(Cluster.objects.get(pk=made.pk), confirm_name=made.name)
                User.objects.filter(username=HA_PAIR_OWNER).delete()
                raise
            self.shared = SharedCluster(cluster)
            self.pooler_port = int(cluster.pooler_port or 0)
            User.objects.filter(username=HA_PAIR_OWNER).delete()  # its rows go too: kept as copies
        self.hold_port()
        return self.shared

    def hold_port(self) -> None:
        if self._held is not None or not self.pooler_port:
            return
        held = socket.socket()
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            held.bind(("127.0.0.1", self.pooler_port))
        except OSError:  # a PgBouncer of the pair still listens there: taken anyway
            held.close()
            return
        self._held = held

    def release_port(self) -> None:
        if self._held is not None:
            self._held.close()
            self._held = None


@pytest.fixture(scope="session")
def ha_pair(django_db_setup: None, django_db_blocker: object) -> Iterator[HaPair]:
    """A two-member db-s-1vcpu-2gb cluster (Patroni, etcd, HAProxy) that the modules of this
    session (one xdist worker) borrow in turn with ``lend_ha_pair`` instead of each building one
    of their own; built by the first loan, removed when the session ends. A module borrows it
    only if it leaves the pair as it found it: two members streaming, no replica, no pool, no
    trusted source (the loan puts member-1 back as the primary).

    Once it is built the node's etcd is never stopped: a module's teardown and a deletion's
    ``ha.forget`` stop it once no cluster row needs it, and between loans the pair has no rows."""
    from panel.clusters.engine import patroni
    from panel.clusters.services import ha

    pair = HaPair()
    stop_etcd = patroni.stop_etcd

    def stop_etcd_but_the_pairs(data_dir: Path, **kwargs: float) -> None:
        # Another node's etcd (an agent's, in tests/) stops as asked.
        if pair.shared is None or Path(data_dir) != ha.etcd_data_dir():
            stop_etcd(data_dir, **kwargs)

    from panel.clusters.services import etcd as etcd_service

    retire_here = etcd_service._retire_here
    pairs_etcd = etcd_service.data_dir()

    def retire_but_the_pairs() -> str | None:
        # A reconciler round with no etcd rows (a transactional test flushed them) would stop the
        # node's etcd under the pair: its loan makes the rows again (``ha.ensure_etcd``). Another
        # node's etcd (a test acting as that node's agent) retires as asked.
        if pair.shared is not None and etcd_service.data_dir() == pairs_etcd:
            return None
        return retire_here()

    keep = pytest.MonkeyPatch()
    keep.setattr(patroni, "stop_etcd", stop_etcd_but_the_pairs)
    keep.setattr(etcd_service, "_retire_here", retire_but_the_pairs)
    try:
        yield pair
    finally:
        keep.undo()
        pair.release_port()
        if pair.shared is not None:
            with django_db_blocker.unblock():  # type: ignore[attr-defined]
                owner = User.objects.create_user(HA_PAIR_OWNER, f"{HA_PAIR_OWNER}@example.com")
                cluster = pair.shared.restore(owner)
                delete_replicas_of(cluster)
                services.delete_cluster(cluster, confirm_name=cluster.name)  # etcd too, if no one else
                User.objects.filter(username=HA_PAIR_OWNER).delete()


@contextlib.contextmanager
def lend_ha_pair(pair: HaPair, django_db_blocker: object, owner: User, name: str) -> Iterator[Cluster]:
    """The session's two-member cluster, owned by ``owner`` and named ``name`` for the loan, both
    members streaming and member-1 the primary (a switchover back if a module before moved it).
    Afterwards what the loan made on it goes (replicas, pools); the caller deletes ``owner``,
    whose rows the cluster's go with (or a transactional test flushed them already)."""
    from panel.clusters.models import MemberRole
    from panel.clusters.services import ha, ha_files, members
    from panel.pools import services as pool_services

    shared = pair.build(django_db_blocker)
    with django_db_blocker.unblock():  # type: ignore[attr-defined]
        pair.release_port()
        cluster = shared.restore(owner)
        Cluster.objects.filter(pk=cluster.pk).update(name=name)
        cluster = Cluster.objects.get(pk=cluster.pk)
        ha.ensure_etcd(cluster.node, 30)  # (a Celery worker's deletion of a cluster may have stopped it)
        # A flush between loans may have taken the etcd CA's row, and a cluster made since a new
        # CA: the pair's Patroni gets the node's client certificate again (read per connection).
        ha_files.write_etcd_tls(cluster, cluster.os_user())
        assert ha.wait_healthy(cluster, 120), ha.read_statuses(cluster)
        ha.refresh_members(cluster)
        if cluster.members.get(role=MemberRole.PRIMARY).name != "member-1":
            members.switchover(cluster, "member-1")
            assert ha.wait_healthy(cluster, 120), ha.read_statuses(cluster)
            ha.refresh_members(cluster)
        proxy_serves_the_primary(cluster)
    try:
        yield cluster
    finally:
        with django_db_blocker.unblock():  # type: ignore[attr-defined]
            if Cluster.objects.filter(pk=cluster.pk).exists():
                delete_replicas_of(cluster)
                for pool in cluster.pools.all():
                    pool_services.delete_pool(pool)
            pair.hold_port()


def _primary_through_proxy(cluster: Cluster) -> str | None:
    """None when the cluster's port (HAProxy) reaches a primary, else why not."""
    import psycopg

    from panel.clusters.tests.conftest import connect_as_client

    try:
        with connect_as_client(cluster, connect_timeout=3) as conn:
            row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
    except psycopg.Error as exc:
        return str(exc).strip()
    return "a standby answered" if row and row[0] else None


def _haproxy_servers(cluster: Cluster) -> str:
    """HAProxy's ``show servers state`` (its admin socket), for a diagnosis."""
    from panel.clusters.lib import patroni as patroni_lib

    chunks = []
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(5)
            conn.connect(str(cluster.socket_dir / patroni_lib.HAPROXY_SOCKET))
            conn.sendall(b"show servers state\n")
            while chunk := conn.recv(65536):
                chunks.append(chunk)
    except OSError as exc:
        return f"(servers unreadable: {exc})"
    return b"".join(chunks).decode(errors="replace")


def proxy_serves_the_primary(cluster: Cluster, timeout: float = 30) -> None:
    """Between loans the pair has no rows, so no reconciler looks after it: before a loan its
    HAProxy must reach the primary on the cluster's port. If it does not within ``timeout`` the
    reconciler's own steps run (HAProxy started if it is not running, its files rewritten if
    they differ) and what was found is reported as a warning of the run, with HAProxy's view of
    its servers; a pair they do not bring back fails the loan."""
    from panel.clusters.engine import patroni
    from panel.clusters.services import firewall, ha

    deadline = time.monotonic() + timeout
    while (why := _primary_through_proxy(cluster)) and time.monotonic() < deadline:
        time.sleep(0.5)
    if why is None:
        return
    running = patroni.haproxy_pid(ha.haproxy_config_path(cluster))
    servers = _haproxy_servers(cluster) if running else ""
    notes = ha.supervise(cluster)
    notes += [note for note in [firewall.reconcile_proxy(cluster)] if note]
    found = f"the HA pair's port did not reach the primary ({why}); HAProxy pid {running} {servers}; repaired: {notes}"
    warnings.warn(found, stacklevel=2)
    deadline = time.monotonic() + timeout
    while (why := _primary_through_proxy(cluster)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert why is None, f"{found}; still: {why}"


def postgres_is_running(cluster: Cluster) -> bool:
    from panel.clusters.engine import postgres

    return postgres.postmaster_pid(cluster.pgdata) is not None


@pytest.fixture
def local_cluster(owner: User, transactional_db: None) -> Iterator[Cluster]:
    """A real, running PostgreSQL cluster (1 GB plan) owned by ``owner``; removed afterwards."""
    cluster = make_local_cluster(owner)
    yield cluster
    if Cluster.objects.filter(pk=cluster.pk).exists():
        delete_replicas_of(cluster)
        cluster.refresh_from_db()
        services.delete_cluster(cluster, confirm_name=cluster.name)


def delete_replicas_of(cluster: Cluster) -> None:
    """A test's read-only replicas of ``cluster`` go first: a source is not deleted under them."""
    for replica in Cluster.objects.filter(replica_of=cluster.pk):
        services.delete_cluster(replica, confirm_name=replica.name)


@pytest.fixture(scope="session", autouse=True)
def _remove_test_data_dir() -> Iterator[None]:
    """Stop every cluster the run left behind and remove the test data directory."""
    yield
    from django.conf import settings

    data_dir = Path(settings.PANEL_DATA_DIR)
    # This node's clusters, and those of the nodes tests run agents for (tests/test_nodes.py).
    for clusters_dir in [data_dir / "clusters", *data_dir.glob("nodes/*/clusters")]:
        remove_clusters_in(clusters_dir)
    if Path(settings.PANEL_DATA_DIR).name.startswith("pgpanel-test-"):
        shutil.rmtree(settings.PANEL_DATA_DIR, ignore_errors=True)


def remove_clusters_in(clusters_dir: Path) -> None:
    """Stop the clusters under a data directory's ``clusters/`` and remove their system users."""
    from panel.clusters.engine import postgres

    if clusters_dir.exists():
        for root in clusters_dir.iterdir():
            postgres.kill(root / "pgdata")
            _remove_cluster_user(root)


def _remove_cluster_user(data_root: Path) -> None:
    """The system user of a cluster the run left behind: its processes stopped, then the user."""
    import psutil
    from django.conf import settings

    from panel.core import osusers

    try:
        name = data_root.owner()
    except (KeyError, OSError):
        return
    if os.geteuid() != 0 or not name.startswith(settings.PANEL_CLUSTER_USER_PREFIX):
        return
    uid = data_root.stat().st_uid
    procs = [p for p in psutil.process_iter(["uids"]) if p.info["uids"] and p.info["uids"].real == uid]
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(procs, timeout=10)
    osusers.remove_system_user(name)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Under pytest-xdist the controller runs no test, so no session fixture removes the data
    directory its settings made (each worker removes its own): remove it here."""
    if os.environ.get("PYTEST_XDIST_WORKER") or not getattr(config.option, "numprocesses", None):
        return
    data_dir = Path(os.environ.get("PANEL_TEST_DATA_DIR", ""))
    if data_dir.name.startswith("pgpanel-test-"):
        shutil.rmtree(data_dir, ignore_errors=True)


# The modules that take longest (each builds clusters with standbys, or runs two node agents),
# measured in full runs: collected first, so that `--dist loadfile` hands them out at the start
# and the run does not end with one worker on a four-minute module while the other idles.
# Within a module the order stays as written.
SLOWEST_FIRST = (
    "panel/clusters/tests/test_etcd_members.py",  # first on its worker: no other store around yet
    "tests/test_remote_members.py",
    "tests/test_remote_replicas.py",
    "tests/test_two_nodes.py",
    "panel/clusters/tests/test_ha_rolling.py",
    "panel/clusters/tests/test_ha_failover.py",
    "panel/clusters/tests/test_ha_member_count.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {path: index for index, path in enumerate(SLOWEST_FIRST)}

    def key(item: pytest.Item) -> int:
        return rank.get(item.nodeid.split("::", 1)[0], len(SLOWEST_FIRST))

    items.sort(key=key)  # stable: every other module keeps its place
