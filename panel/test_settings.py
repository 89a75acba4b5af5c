"""Settings for the test suite: the normal settings, read with a test environment.

Tests get their own data directory (traversable by the unprivileged PostgreSQL user), their own
port range and a private Redis port, so they never touch a panel running on the same machine.
"""

from __future__ import annotations

import os
import socket
import tempfile


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# pytest-xdist: each worker is a test session of its own (``make test`` runs two): its own data
# directory and Redis port, not the ones the controller chose and the worker inherited. Its
# SQLite test database gets the worker's suffix from pytest-django, its ports a random window.
_xdist_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _xdist_worker and os.environ.get("PANEL_TEST_SESSION_OF") != _xdist_worker:
    os.environ["PANEL_TEST_SESSION_OF"] = _xdist_worker
    os.environ.pop("PANEL_TEST_DATA_DIR", None)
    os.environ.pop("PANEL_TEST_REDIS_PORT", None)


def _scratch_base() -> str:
    """Where the session's data directory goes: PANEL_TEST_TMPDIR, else the machine's tmpfs when
    it has one with room (the suite's clusters copy, fsync and remove thousands of files: a
    quarter faster there than on this machine's disk), else /tmp. (Sockets stay under 100 bytes:
    /dev/shm/pgpanel-test-XXXXXXXX/n/a1234/clusters/<32 hex>/run/.s.PGSQL.NNNNN is 99.)"""
    chosen = os.environ.get("PANEL_TEST_TMPDIR")
    if chosen:
        return chosen
    try:
        with open("/proc/mounts") as mounts:
            shm = [line.split() for line in mounts if line.split()[1:2] == ["/dev/shm"]]
        free = os.statvfs("/dev/shm")
    except OSError:
        return "/tmp"
    usable = bool(shm) and shm[-1][2] == "tmpfs" and "noexec" not in shm[-1][3].split(",")
    if usable and os.access("/dev/shm", os.W_OK) and free.f_bavail * free.f_frsize >= 8 << 30:
        return "/dev/shm"
    return "/tmp"


if "PANEL_TEST_DATA_DIR" not in os.environ:
    # Not under pytest's tmp_path: that is 0700 and PostgreSQL's user could not enter it. 0711, the
    # data directory's mode (panel/files.py): traversable, not listable.
    data_dir = tempfile.mkdtemp(prefix="pgpanel-test-", dir=_scratch_base())
    os.chmod(data_dir, 0o711)
    os.environ["PANEL_TEST_DATA_DIR"] = data_dir
os.environ["PANEL_DATA_DIR"] = os.environ["PANEL_TEST_DATA_DIR"]
os.environ.setdefault("PANEL_PORT_RANGE", "26000-26999")
# The test process is the node "local" (role "all"): room for every test's clusters at once.
# Placement and full nodes are tested with nodes of their own (panel/clusters/tests/test_nodes.py).
os.environ.setdefault("PANEL_NODE_RAM_GB", "512")
os.environ.setdefault("PANEL_NODE_VCPUS", "256")
os.environ.setdefault("PANEL_TEST_REDIS_PORT", str(_free_port()))
# A process the tests start (PANEL_TEST_WORKER) keeps the broker it was given: a node agent in a
# network namespace (tests/fixtures/nsnodes.py) reaches it on the bridge's address, not on a
# 127.0.0.1 that is its namespace's own.
if os.environ.get("PANEL_TEST_WORKER") != "1" or not os.environ.get("REDIS_URL"):
    os.environ["REDIS_URL"] = f"redis://127.0.0.1:{os.environ['PANEL_TEST_REDIS_PORT']}/0"
# The metadata database: SQLite (a file in the data directory) unless PANEL_TEST_DATABASE_URL
# names a PostgreSQL server (make test-pg), where pytest-django creates test_<name>. A DATABASE_URL
# of one's own panel is never used. Celery workers started by the tests get DATABASE_URL pointing
# at the test database (tests/fixtures/processes.py, worker_database_url).
_worker = os.environ.get("PANEL_TEST_WORKER") == "1"
if not _worker:
    os.environ.pop("DATABASE_URL", None)
    if os.environ.get("PANEL_TEST_DATABASE_URL"):
        os.environ["DATABASE_URL"] = os.environ["PANEL_TEST_DATABASE_URL"]
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

from panel.settings import *  # noqa: E402,F403

if not _worker:
    # Programs the tests start find no DATABASE_URL, as under SQLite: a panel of their own.
    os.environ.pop("DATABASE_URL", None)

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast logins in tests
# Tests do not run `collectstatic`: plain names from the app folders (WhiteNoise finds them there),
# not the manifest of hashed names that make run and the image build.
STORAGES = {
    **STORAGES,  # noqa: F405
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# A new cluster's first backup is taken by the tests that want one (panel/backups/tests).
PANEL_BACKUP_AFTER_CREATE = False
# A run makes about a hundred clusters: one initdb per PostgreSQL version, then copies (issue 40).
PANEL_PGDATA_TEMPLATE = True
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
