"""Issue 10, row 6: the panel's data directory is private, and every start keeps it so.

Row 6 was: any local user reads `panel.sqlite3` (0644 in a 0755 data directory) and takes the
session keys of logged-in staff. Replayed here as `nobody`, before (the modes of an old install:
the read works, so the probe can fail) and after the settings of a start repaired them; next to
each refusal, the panel itself still reads its files, logs a user in and serves a page. Then the
start check that does the repair: what the panel owns it repairs and says so, what it does not own
(another user's file, a symbolic link, an open parent) it refuses, naming the command that fixes it.
The Redis password and what `make run` leaves are tests/security/test_make_run_private.py.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from panel import files
from panel.clusters.checks import check_private_files
from tests.security.private_files import ROOT, as_nobody, mode, panel_env, run_panel

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="replays another local user: needs root")
sqlite_only = pytest.mark.skipif(
    connection.vendor != "sqlite",
    reason="only SQLite keeps the metadata in files of the data directory (make test-pg: PostgreSQL)",
)


# A staff member's session, as a login stores it.
LOG_IN = """
import django
django.setup()
from django.contrib.sessions.backends.db import SessionStore
session = SessionStore()
session["_auth_user_id"] = "1"
session.create()
print(session.session_key)
"""


@pytest.fixture
def old_install() -> Iterator[Path]:
    """A data directory with the modes the panel left before umask 077: 0755, files 0644."""
    data_dir = Path(tempfile.mkdtemp(prefix="pgpanel-files-", dir="/tmp"))
    os.chmod(data_dir, 0o755)
    migrated = run_panel(data_dir, "manage.py", "migrate", "--no-input", "-v", "0")
    assert migrated.returncode == 0, migrated.stderr
    logged_in = run_panel(data_dir, "-c", LOG_IN)
    assert logged_in.returncode == 0, logged_in.stderr
    (data_dir / "session-key-for-the-test").write_text(logged_in.stdout.strip().splitlines()[-1])
    for path in [data_dir, data_dir / "keys", *(data_dir / "keys").iterdir()]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    # An old install kept its database at the top of the data directory, before db/ existed.
    (data_dir / "db" / "panel.sqlite3").rename(data_dir / "panel.sqlite3")
    shutil.rmtree(data_dir / "db")
    os.chmod(data_dir / "panel.sqlite3", 0o644)
    yield data_dir
    shutil.rmtree(data_dir, ignore_errors=True)


# Writes a row and, with the connection still open (so SQLite keeps -wal and -shm), prints modes.
WRITE_AND_STAT = """
import django, json, os, stat
django.setup()
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
User.objects.create_user("dave", password="dave-password-1")
db = settings.DATABASES["default"]["NAME"]
paths = [db, db + "-wal", db + "-shm", str(settings.PANEL_DATA_DIR)]
paths += [str(p) for p in (settings.PANEL_DATA_DIR / "keys").iterdir()]
paths += [str(settings.PANEL_DATA_DIR / name) for name in ("keys", "clusters", "db")]
print(json.dumps({p: stat.S_IMODE(os.stat(p).st_mode) for p in paths}))
connection.close()
"""


def modes_after_a_write(data_dir: Path) -> dict[str, int]:
    out = run_panel(data_dir, "-c", WRITE_AND_STAT)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_every_panel_process_starts_with_umask_077() -> None:
    # From a shell with 022, as `make run`, gunicorn and celery are started: the package sets it.
    out = subprocess.run(
        [sys.executable, "-c", "import os, panel; print(oct(os.umask(0)))"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        umask=0o022,
        env=panel_env(Path(tempfile.gettempdir()) / "unused"),
    )
    assert out.stdout.strip() == "0o77", out.stderr


def test_a_new_install_has_private_files_from_the_first_write() -> None:
    data_dir = Path(tempfile.mkdtemp(prefix="pgpanel-files-new-", dir="/tmp")) / "data"
    os.chmod(data_dir.parent, 0o755)  # the user that runs PostgreSQL must traverse it (E002)
    try:
        migrated = run_panel(data_dir, "manage.py", "migrate", "--no-input", "-v", "0")
        assert migrated.returncode == 0, migrated.stderr
        modes = modes_after_a_write(data_dir)
        assert modes[str(data_dir)] == 0o711
        assert modes[str(data_dir / "keys")] == 0o700
        assert modes[str(data_dir / "clusters")] == 0o711
        assert modes[str(data_dir / "db")] == 0o700
        for suffix in ("", "-wal", "-shm"):
            assert modes[f"{data_dir}/db/panel.sqlite3{suffix}"] == 0o600, suffix
        keys = [p for p in modes if p.startswith(f"{data_dir}/keys/")]
        assert {Path(p).name for p in keys} >= {"django_secret_key", "encryption.key", "redis_password"}
        assert all(modes[p] == 0o600 for p in keys)
        # Nothing of the data directory was ever loose (what the checkout's catalogue needed, which
        # tests/test_run_script.py makes 0600 meanwhile, is another matter: panel/files.py).
        assert [
            line for line in migrated.stderr.splitlines() if "Repaired" in line and str(data_dir) in line
        ] == []
    finally:
        shutil.rmtree(data_dir.parent, ignore_errors=True)


@needs_root
def test_row_6_nobody_cannot_read_the_database_keys_or_list_the_data_dir_after_a_start(
    old_install: Path,
) -> None:
    db, key = old_install / "panel.sqlite3", old_install / "keys" / "django_secret_key"
    session_key = (old_install / "session-key-for-the-test").read_text()
    (old_install / "session-key-for-the-test").unlink()
    # Before: the attack of row 6 works on the modes of an old install (so this probe can fail).
    assert session_key in as_nobody("cat", str(db)).stdout
    assert as_nobody("cat", str(key)).stdout.strip() == key.read_text().strip()
    assert "panel.sqlite3" in as_nobody("ls", str(old_install)).stdout

    modes = modes_after_a_write(old_install)  # any start of the panel: here a shell command

    # The start moved the database into db/ (0700), where a web server of its own may write.
    assert not db.exists()
    db = old_install / "db" / "panel.sqlite3"
    assert modes[str(old_install)] == 0o711
    assert modes[str(old_install / "db")] == 0o700
    for suffix in ("", "-wal", "-shm"):
        assert modes[f"{db}{suffix}"] == 0o600, suffix
    for target in (db, key, old_install / "keys" / "encryption.key", old_install / "keys" / "redis_password"):
        refused = as_nobody("cat", str(target))
        assert refused.returncode != 0 and "Permission denied" in refused.stderr, target
        assert refused.stdout == ""
    listing = as_nobody("ls", str(old_install))
    assert listing.returncode != 0 and "Permission denied" in listing.stderr
    # The neighbour that must keep working: a cluster's user still traverses to clusters/.
    assert as_nobody("ls", "-d", str(old_install / "clusters")).returncode == 0
    # And the panel itself still reads its database: the staff member stays logged in.
    code = "import django; django.setup(); from django.contrib.sessions.backends.db import SessionStore; "
    code += f"print(SessionStore({session_key!r}).load().get('_auth_user_id'))"
    kept = run_panel(old_install, "-c", code)
    assert kept.returncode == 0 and kept.stdout.strip() == "1", kept.stderr


def log_in_and_serve() -> None:
    User.objects.create_user("erin", password="erin-password-1")
    client = Client()
    # Through the login form, as a person logs in (django-axes wants the request).
    response = client.post("/login/", {"username": "erin", "password": "erin-password-1"})
    assert response.status_code == 302, response.content[:500]
    assert client.get("/clusters/").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_the_panel_still_logs_in_and_serves_from_its_private_data_dir() -> None:
    """The legitimate side of row 6, in this very process (its settings secured the data dir)."""
    from django.conf import settings

    log_in_and_serve()
    assert mode(Path(settings.PANEL_DATA_DIR)) == 0o711


@sqlite_only
@pytest.mark.django_db(transaction=True)
def test_the_test_database_file_is_private() -> None:
    """Row 6 in this very process: the session a login writes lands in 0600 files."""
    log_in_and_serve()
    db = Path(connection.settings_dict["NAME"])
    assert db.exists() and Path(f"{db}-wal").exists(), "the session write goes through the WAL"
    for suffix in ("", "-wal", "-shm"):
        assert mode(Path(f"{db}{suffix}")) == 0o600, suffix
    if os.geteuid() == 0:
        assert "Permission denied" in as_nobody("cat", str(db)).stderr


@pytest.fixture
def loose_tree(settings: object) -> Iterator[Path]:
    data_dir = Path(tempfile.mkdtemp(prefix="pgpanel-files-check-", dir="/tmp"))
    for name in ("keys", "clusters"):
        (data_dir / name).mkdir()
    db = data_dir / "panel.sqlite3"
    for path in (
        db,
        Path(f"{db}-wal"),
        data_dir / "keys" / "encryption.key",
        data_dir / "celerybeat-schedule",
    ):
        path.write_text("x")
        os.chmod(path, 0o644)
    for path in (data_dir, data_dir / "keys", data_dir / "clusters"):
        os.chmod(path, 0o755)
    settings.PANEL_DATA_DIR = data_dir  # type: ignore[attr-defined]
    settings.PANEL_SQLITE_FILES = [db]  # type: ignore[attr-defined]
    files.repaired_at_start.clear()
    yield data_dir
    shutil.rmtree(data_dir, ignore_errors=True)


def test_the_start_check_repairs_what_the_panel_owns_and_says_so(loose_tree: Path) -> None:
    messages = check_private_files(None)
    said = "\n".join(m.msg for m in messages)
    assert {m.id for m in messages} == {"clusters.W010"}
    assert f"{loose_tree}: mode 0755 changed to 0711" in said
    assert f"{loose_tree / 'panel.sqlite3'}: mode 0644 changed to 0600" in said
    assert f"{loose_tree / 'panel.sqlite3-wal'}: mode 0644 changed to 0600" in said
    assert f"{loose_tree / 'keys'}: mode 0755 changed to 0700" in said
    assert f"{loose_tree / 'keys' / 'encryption.key'}: mode 0644 changed to 0600" in said
    assert f"{loose_tree / 'clusters'}: mode 0755 changed to 0711" in said
    assert mode(loose_tree) == 0o711
    assert mode(loose_tree / "celerybeat-schedule") == 0o600
    assert mode(loose_tree / "panel.sqlite3") == 0o600
    assert check_private_files(None) == []  # said once; nothing left to repair


@needs_root
def test_the_start_check_refuses_what_it_does_not_own_and_names_the_command(loose_tree: Path) -> None:
    nobody = pwd.getpwnam("nobody")
    db = loose_tree / "panel.sqlite3"
    os.chown(db, nobody.pw_uid, nobody.pw_gid)
    errors = [m for m in check_private_files(None) if m.id == "clusters.E010"]
    assert len(errors) == 1
    assert "belongs to 'nobody'" in errors[0].msg
    assert errors[0].hint == f"Run: chown root {db} && chmod 0600 {db}"
    assert mode(db) == 0o644  # left as it was: not the panel's to change
    # The command it names is the fix.
    subprocess.run(["chown", "root", str(db)], check=True, timeout=10)
    subprocess.run(["chmod", "0600", str(db)], check=True, timeout=10)
    assert [m for m in check_private_files(None) if m.id == "clusters.E010"] == []


def test_the_start_check_refuses_a_symbolic_link_and_an_open_parent(
    loose_tree: Path, settings: object
) -> None:
    db = loose_tree / "panel.sqlite3"
    db.unlink()
    db.symlink_to("/etc/hostname")
    before = mode(Path("/etc/hostname"))
    errors = [m for m in check_private_files(None) if m.id == "clusters.E010"]
    assert any("not a regular file" in e.msg and str(db) in e.hint for e in errors)
    assert mode(Path("/etc/hostname")) == before

    parent = loose_tree / "open"
    parent.mkdir()
    os.chmod(parent, 0o777)  # no sticky bit: anyone may rename the data directory away
    (parent / "data").mkdir()
    settings.PANEL_DATA_DIR = parent / "data"  # type: ignore[attr-defined]
    settings.PANEL_SQLITE_FILES = []  # type: ignore[attr-defined]
    errors = [m for m in check_private_files(None) if m.id == "clusters.E010"]
    assert [e.hint for e in errors][0].startswith(f"Run: chmod go-w {parent}")
    os.chmod(parent, 0o755)
    assert [m for m in check_private_files(None) if m.id == "clusters.E010"] == []


@needs_root
def test_manage_py_check_refuses_to_start_with_the_fix_in_its_message(old_install: Path) -> None:
    nobody = pwd.getpwnam("nobody")
    key = old_install / "keys" / "metrics_token"
    os.chown(key, nobody.pw_uid, nobody.pw_gid)
    checked = run_panel(old_install, "manage.py", "check")
    assert checked.returncode != 0
    assert "(clusters.E010)" in checked.stderr
    assert f"chown root {key} && chmod 0600 {key}" in checked.stderr
    # What it could repair, it did and said.
    # Moved into db/ by the start, keeping its loose mode until the repair.
    assert f"Repaired: {old_install / 'db' / 'panel.sqlite3'}: mode 0644 changed to 0600" in checked.stderr
    assert mode(old_install / "db" / "panel.sqlite3") == 0o600
