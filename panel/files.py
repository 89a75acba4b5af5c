"""The panel's own files are private: the data directory, the metadata database, keys, logs.

Layout of PANEL_DATA_DIR and the modes kept here (cluster directories, the guard library and the
collected static files set their own modes where they are created):

    PANEL_DATA_DIR        0711  cluster users traverse it to reach clusters/<id>; nobody lists it
      db/                 0700  what the web server writes; its user's own when make run, as root,
                                runs the web server as PANEL_WEB_USER (see share_with_web_user)
        panel.sqlite3*    0600  with its -wal, -shm and -journal files: session keys, password hashes
        cache/                  the web's cache (attach's rate limit)
      keys/               0700  every file in it 0600; 0750 and 0640 for the web user's group
                                when the web server runs as PANEL_WEB_USER
      redis/              0700  the private Redis of `make run`: its config holds the password
      clusters/           0711  one directory per cluster, each owned by the cluster's user
      any other file      0600  logs (beat's schedule is in db/)
      staticfiles/, lib/        readable by others on purpose; not touched here

``secure_data_dir`` repairs (chmod) what the panel's own user owns and returns, for the rest, a
problem with the exact command that fixes it. Settings call it on every start (so gunicorn and
Celery started by other means are covered), the system check in panel.clusters.checks reports what
was repaired and refuses to start on a problem. No Django imports: settings load this module.
"""

from __future__ import annotations

import logging
import os
import pwd
import shlex
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

# Every process of the panel creates files readable by nobody else unless it says otherwise.
PANEL_UMASK = 0o077
DATA_DIR_MODE = 0o711
PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
# Directories on the way to a new data directory: as before the umask, anyone may traverse them.
PARENT_DIR_MODE = 0o755
SQLITE_SUFFIXES = ("", "-wal", "-shm", "-journal")
PRIVATE_DIRS = ("keys", "redis", "db")
TRAVERSE_ONLY_DIRS = ("clusters",)
# Readable by the web user's group, not writable (see share_with_web_user).
SHARED_DIR_MODE = 0o750
SHARED_FILE_MODE = 0o640
DB_DIR = "db"
LEGACY_SQLITE = "panel.sqlite3"  # where the metadata database lived before db/


@dataclass(frozen=True)
class Problem:
    """A file the panel cannot make private itself, and the command that does it."""

    message: str
    fix: str


@dataclass
class Report:
    repaired: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


log = logging.getLogger(__name__)

# What the settings of this process repaired at start, so the system check can say it.
repaired_at_start: list[str] = []
# The same for the checkout's files the web server reads (share_checkout_with_web).
shared_at_start: list[str] = []


def _me() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


def _sudo() -> str:
    return "" if os.geteuid() == 0 else "sudo "


def _make_dir(path: Path, mode: int) -> None:
    """Create ``path`` with exactly ``mode`` (missing parents traversable by all, as before)."""
    missing = [p for p in [*reversed(path.parents), path] if not p.exists()]
    for directory in missing:
        try:
            directory.mkdir()
        except FileExistsError:
            continue  # another process of the panel created it first
        except OSError as exc:
            raise ImproperlyConfigured(
                f"Cannot create {directory} ({exc.strerror}). Create the data directory as the user "
                f"that runs the panel: {_sudo()}install -d -m {DATA_DIR_MODE:04o} -o {_me()} "
                f"{shlex.quote(str(path))}"
            ) from None
        os.chmod(directory, mode if directory == path else PARENT_DIR_MODE)


def ensure_data_dir(data_dir: Path, *, move_legacy_db: bool = True) -> None:
    """Create the data directory and its private sub-directories with their modes when missing.

    Called before the settings create keys, so a first start never has a moment with loose modes.
    """
    if not data_dir.exists():
        _make_dir(data_dir, DATA_DIR_MODE)
    if not (data_dir / "keys").exists():  # the settings write into it right after
        _make_dir(data_dir / "keys", PRIVATE_DIR_MODE)
    if not (data_dir / DB_DIR).exists():
        _make_dir(data_dir / DB_DIR, PRIVATE_DIR_MODE)
        if move_legacy_db:
            _move_legacy_database(data_dir)
    for name in TRAVERSE_ONLY_DIRS:
        # Created here with its mode: under umask 077 a mkdir(parents=True) of a cluster's
        # directory would make it 0700 and the cluster's user could not reach its own directory.
        if not (data_dir / name).exists():
            _make_dir(data_dir / name, DATA_DIR_MODE)


def _move_legacy_database(data_dir: Path) -> None:
    """An install from before db/ kept its database at the top of the data directory, where a web
    server running as another user could not create the -wal and -shm files beside it."""
    for suffix in SQLITE_SUFFIXES:
        old = data_dir / f"{LEGACY_SQLITE}{suffix}"
        if old.is_file() and not old.is_symlink():
            old.rename(data_dir / DB_DIR / old.name)


def share_with_web_user(data_dir: Path, uid: int, gid: int) -> None:
    """Give the web server's user (uid, gid) what it needs and nothing more, when make run runs as
    root: db/ (the metadata database, the cache) becomes its own; keys/ stays root's and becomes
    readable, not writable, by its group (the Django secret, the encryption key, the Redis
    password: the web needs all three). Cluster directories stay closed to it."""
    db_dir = data_dir / DB_DIR
    for path in [db_dir, *db_dir.rglob("*")]:
        if not path.is_symlink():
            os.chown(path, uid, gid)
    keys = data_dir / "keys"
    os.chown(keys, 0, gid)
    os.chmod(keys, SHARED_DIR_MODE)
    for path in keys.iterdir():
        if path.is_file() and not path.is_symlink():
            os.chown(path, 0, gid)
            os.chmod(path, SHARED_FILE_MODE)


def _fix_mode(path: Path, st: os.stat_result, want: int, report: Report, *, why: str) -> None:
    have = stat.S_IMODE(st.st_mode)
    if have == want:
        return
    q = shlex.quote(str(path))
    if st.st_uid != os.geteuid():
        try:
            owner = pwd.getpwuid(st.st_uid).pw_name
        except KeyError:
            owner = str(st.st_uid)
        report.problems.append(
            Problem(
                f"{path} has mode {have:04o} and belongs to {owner!r}, not to {_me()!r} that runs "
                f"the panel; it must be {want:04o} ({why}).",
                f"{_sudo()}chown {_me()} {q} && {_sudo()}chmod {want:04o} {q}",
            )
        )
        return
    try:
        os.chmod(path, want)
    except OSError as exc:
        report.problems.append(
            Problem(
                f"Cannot change the mode of {path} from {have:04o} to {want:04o}: {exc.strerror}.",
                f"{_sudo()}chmod {want:04o} {q}",
            )
        )
        return
    report.repaired.append(f"{path}: mode {have:04o} changed to {want:04o} ({why}).")


def _secure(path: Path, want: int, report: Report, *, why: str, directory: bool) -> None:
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    kind_ok = stat.S_ISDIR(st.st_mode) if directory else stat.S_ISREG(st.st_mode)
    if not kind_ok:
        # A symbolic link would make chmod act on whatever it points to, outside our control.
        expected = "a directory" if directory else "a regular file"
        report.problems.append(
            Problem(
                f"{path} is not {expected} (a symbolic link?); the panel keeps its private files "
                f"only in {expected}s of its own.",
                f"{_sudo()}mv {shlex.quote(str(path))} {shlex.quote(str(path))}.moved and start again",
            )
        )
        return
    _fix_mode(path, st, want, report, why=why)


def _group_of(path: Path) -> int | None:
    try:
        return path.lstat().st_gid
    except OSError:
        return None


def _open_ancestors(data_dir: Path) -> Iterable[Path]:
    """Directories above the data directory that others may write to (without the sticky bit):
    whoever can write there can rename the data directory away and put their own in its place."""
    for directory in data_dir.parents:
        try:
            st = directory.stat()
        except OSError:
            continue
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
            yield directory


def _entries(directory: Path) -> list[Path]:
    """What ``directory`` holds; nothing when this process may not list it (the web server's
    user, for the directories that are root's alone)."""
    try:
        return sorted(directory.iterdir())
    except PermissionError:
        return []


def secure_data_dir(data_dir: Path, sqlite_files: Iterable[Path] = (), web_gid: int | None = None) -> Report:
    """Give the panel's own files their modes; report what was repaired and what cannot be.
    ``web_gid``: the web server's group, which may read keys/ (see share_with_web_user)."""
    report = Report()
    for directory in _open_ancestors(data_dir):
        q = shlex.quote(str(directory))
        report.problems.append(
            Problem(
                f"{directory}, above the data directory {data_dir}, is writable by other users: "
                "they could replace the data directory.",
                f"{_sudo()}chmod go-w {q} (or set PANEL_DATA_DIR to a directory under one that "
                "only root can write)",
            )
        )
    _secure(data_dir, DATA_DIR_MODE, report, why="others may traverse it, not list it", directory=True)
    for name in PRIVATE_DIRS:
        directory = data_dir / name
        shared = name == "keys" and web_gid is not None and _group_of(directory) == web_gid
        dir_mode, file_mode = (
            (SHARED_DIR_MODE, SHARED_FILE_MODE) if shared else (PRIVATE_DIR_MODE, PRIVATE_FILE_MODE)
        )
        _secure(directory, dir_mode, report, why="private to the panel", directory=True)
        if name == DB_DIR:
            continue  # the database's files are checked below, the cache is the web's
        if directory.is_dir() and not directory.is_symlink():
            for path in _entries(directory):
                if not path.is_dir():
                    _secure(path, file_mode, report, why="a secret", directory=False)
    for name in TRAVERSE_ONLY_DIRS:
        _secure(data_dir / name, DATA_DIR_MODE, report, why="cluster users traverse it", directory=True)
    databases = {Path(f"{db}{suffix}") for db in sqlite_files for suffix in SQLITE_SUFFIXES}
    for path in sorted(databases):
        _secure(
            path, PRIVATE_FILE_MODE, report, why="it holds session keys and password hashes", directory=False
        )
    # Anything else the panel writes at the top (logs): nobody else reads it.
    if data_dir.is_dir():
        for path in _entries(data_dir):
            if path in databases or path.is_symlink() or not path.is_file():
                continue
            if path.stat().st_uid == os.geteuid():
                _secure(path, PRIVATE_FILE_MODE, report, why="private to the panel", directory=False)
    return report


# What the web server reads from the checkout while it serves: the compiled catalogues, the
# templates, the code. When make run runs as root the web server runs as PANEL_WEB_USER, who
# reads them as "others"; a file made by a process of the panel (umask 077), such as the German
# catalogue that `manage.py compilemessages` writes, would be 0600 root and every German page a 500.
WEB_READ_DIRS = ("locale", "templates", "static", "panel", "benchmarks")
# Written by whichever user imports a module first; Python reads the source when it may not.
NOT_WEB_READ = ("__pycache__",)


def web_unreadable(root: Path, dirs: Iterable[str] = WEB_READ_DIRS) -> list[tuple[Path, int]]:
    """Files under ``root``'s ``dirs`` that others may not read, directories they may not enter,
    each with the mode it needs."""
    found: list[tuple[Path, int]] = []
    for name in dirs:
        for directory, subdirs, names in os.walk(root / name):
            subdirs[:] = sorted(d for d in subdirs if d not in NOT_WEB_READ)
            here = Path(directory)
            for path, needed in [(here, 0o005), *((here / n, 0o004) for n in sorted(names))]:
                try:
                    st = path.lstat()
                except FileNotFoundError:
                    continue
                if stat.S_ISLNK(st.st_mode):
                    continue
                mode = stat.S_IMODE(st.st_mode)
                if mode & needed != needed:
                    # Group as others: the web user is in neither root's group nor another's.
                    found.append((path, mode | needed | (needed << 3)))
    return found


def share_checkout_with_web(root: Path, dirs: Iterable[str] = WEB_READ_DIRS) -> Report:
    """Make what the web server reads readable by it (see WEB_READ_DIRS); report what was
    repaired, and what belongs to someone else with the command that repairs it."""
    report = Report()
    for path, want in web_unreadable(root, dirs):
        try:
            st = path.lstat()
        except FileNotFoundError:
            continue
        _fix_mode(path, st, want, report, why="the web server reads it as another user")
    return report


def secure_at_start(data_dir: Path, sqlite_files: Iterable[Path], web_gid: int | None = None) -> None:
    """What the settings run in every process: repair, and say so on stderr at once (logging is not
    configured yet; Python's last-resort handler prints warnings), since the first process to start
    repairs and the ones after it, `manage.py check` included, find nothing left to repair."""
    report = secure_data_dir(data_dir, sqlite_files, web_gid)
    shared = Report()
    if os.geteuid() == 0:  # only then does the web server run as another user (make run)
        shared = share_checkout_with_web(Path(__file__).resolve().parent.parent)
        report.problems += shared.problems
    for line in [*report.repaired, *shared.repaired]:
        log.warning("Repaired: %s", line)
    for problem in report.problems:
        log.error("%s Run: %s", problem.message, problem.fix)
    repaired_at_start.extend(report.repaired)
    shared_at_start.extend(shared.repaired)


def group_id(user: str) -> int | None:
    """The id of the group named like ``user`` (make run's web server user), or None without one."""
    import grp

    try:
        return grp.getgrnam(user).gr_gid
    except KeyError:
        return None
