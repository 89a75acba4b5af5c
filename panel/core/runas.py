"""Who runs a program the panel starts, running it as that user, and writing files it owns.

When the panel runs as root, nothing it starts runs as root: PostgreSQL and PgBouncer run as the
cluster's own system user, pgbench as a user of its own. ``OsUser`` names that user; ``run_as``
runs a program as it, from an argument list (never a shell), with a timeout; the file helpers
write what it may read (0600/0700, owned by it). As anyone else the panel runs everything as
itself. The modules that spawn one tool (the PostgreSQL and PgBouncer supervisors, the pgbench
runner) build on this one.
"""

from __future__ import annotations

import logging
import os
import pwd
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from django.conf import settings

log = logging.getLogger(__name__)


class EngineError(Exception):
    """A program the panel runs (PostgreSQL's, PgBouncer, useradd) failed; the message carries
    its own words. ``words``: the same said by the panel (a coded Message a page may show, where
    the program's text goes to the log only; read by clusters.services.failures)."""

    def __init__(self, *args: object, words: object = None) -> None:
        super().__init__(*args)
        self.words = words


class SpawnOptions(TypedDict, total=False):
    """The subprocess options of ``OsUser.spawn_options`` (typed, so that subprocess's overloads
    accept them as keywords)."""

    user: int
    group: int
    extra_groups: list[int]


@dataclass(frozen=True)
class OsUser:
    """Who runs a program the panel starts (PostgreSQL, PgBouncer, pgbench): an unprivileged user
    when we are root, else ourselves."""

    name: str
    uid: int
    gid: int
    home: str

    @property
    def is_self(self) -> bool:
        return self.uid == os.geteuid()

    def spawn_options(self) -> SpawnOptions:
        """subprocess options that start a program as this user (none when it is ourselves): its
        uid and gid, and none of root's supplementary groups."""
        return {} if self.is_self else {"user": self.uid, "group": self.gid, "extra_groups": []}


def current_user() -> OsUser:
    """The user the panel itself runs as."""
    entry = pwd.getpwuid(os.geteuid())
    return OsUser(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir)


def os_user() -> OsUser:
    """The global runner: PANEL_RUN_AS_USER as root (clusters created before each cluster had a
    user of its own still run as it), else ourselves."""
    if os.geteuid() != 0:
        return current_user()
    try:
        entry = pwd.getpwnam(settings.PANEL_RUN_AS_USER)
    except KeyError:
        raise EngineError(
            f"The panel runs as root, so PostgreSQL must run as an unprivileged user, but the "
            f"user {settings.PANEL_RUN_AS_USER!r} does not exist. Install PostgreSQL from apt "
            f"(it creates 'postgres') or set PANEL_RUN_AS_USER."
        ) from None
    if entry.pw_uid == 0:
        raise EngineError("PANEL_RUN_AS_USER must not be root: PostgreSQL refuses to run as root.")
    return OsUser(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir)


def os_user_named(name: str) -> OsUser:
    """The OS user a cluster runs as: ``name`` when the panel runs as root, ourselves otherwise;
    a blank name (a cluster from before per-cluster users) is the global runner."""
    if os.geteuid() != 0 or not name:
        return os_user()
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise EngineError(
            f"The cluster's system user {name!r} does not exist; it is created when the cluster is "
            f"provisioned. Delete the cluster, or create the user again with useradd --system {name}."
        ) from None
    if entry.pw_uid == 0:
        raise EngineError(f"The cluster's system user {name!r} is root; PostgreSQL refuses to run as root.")
    return OsUser(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir)


def run_as_runner(
    args: list[str], *, timeout: float, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``run_as`` the global runner user (see ``os_user``)."""
    return run_as(os_user(), args, timeout=timeout, cwd=cwd)


def spawn_in(user: OsUser, args: Sequence[str], join: Sequence[Path] = ()) -> tuple[list[str], SpawnOptions]:
    """The argument list and subprocess options that start ``args`` as ``user``, inside the
    cgroups whose ``cgroup.procs`` files ``join`` names (as root; elsewhere there are none)."""
    if join and os.geteuid() == 0:
        # The wrapper joins the groups as root, then becomes ``user`` (run as a file: no package).
        wrapper = [sys.executable, "-I", str(Path(__file__).with_name("cgexec.py"))]
        wrapper += ["--uid", str(user.uid), "--gid", str(user.gid)]
        for procs in join:
            wrapper += ["--join", str(procs)]
        return [*wrapper, "--", *args], {}
    return list(args), user.spawn_options()


def run_as(
    user: OsUser,
    args: list[str],
    *,
    timeout: float,
    cwd: Path | None = None,
    join: Sequence[Path] = (),
    env: dict[str, str] | None = None,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run a program to completion as ``user``, from an argument list, in its own session, with a
    minimal environment and a timeout (PgBouncer's supervisor uses it too). ``join``: the
    ``cgroup.procs`` files of the cgroups it (and all it starts) runs in (panel/core/cgexec.py).
    ``env``: variables added to the minimal environment (e.g. ``PGPASSFILE``); ``input``: its
    standard input (else none)."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": user.home,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        **(env or {}),
    }
    args, kwargs = spawn_in(user, args, join)
    log.debug("running %s", args[0])
    try:
        result = subprocess.run(
            args,
            capture_output=True,
            text=True,
            input=input,
            timeout=timeout,
            env=env,
            cwd=str(cwd) if cwd else "/",
            start_new_session=True,
            # What the program creates (PgBouncer's pidfile and log, pg_ctl's log) is its user's only.
            umask=0o077,
            **kwargs,
        )
    except subprocess.TimeoutExpired:
        raise EngineError(f"{Path(args[0]).name} did not finish within {timeout:.0f} s.") from None
    except OSError as exc:
        raise EngineError(f"Could not run {args[0]}: {exc.strerror}.") from None
    return result


def chown_to(path: Path, user: OsUser) -> None:
    # Only root gives files away; anyone else owns what it writes.
    if os.geteuid() == 0 and not user.is_self:
        os.chown(path, user.uid, user.gid, follow_symlinks=False)


def chown_to_runner(path: Path) -> None:
    chown_to(path, os_user())


def make_private_dir(path: Path, owner: OsUser | None = None) -> None:
    """A 0700 directory of ``owner`` (None: the global runner, see ``os_user``)."""
    # Missing parents (clusters/ under the data directory) get 0711, not what the panel's umask
    # 077 would give them: the cluster's user must pass through them to its own directory.
    for parent in [p for p in reversed(path.parents) if not p.exists()]:
        parent.mkdir(exist_ok=True)
        os.chmod(parent, 0o711)
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    chown_to(path, owner or os_user())


def write_private_file(path: Path, content: str, mode: int = 0o600, *, owner: OsUser | None = None) -> None:
    """Write atomically (temp file + rename) with ``mode``, owned by ``owner`` (None: whoever owns
    the directory it goes in, e.g. the cluster's user in its PGDATA)."""
    if owner is None:
        st = path.parent.stat()
        owner = OsUser("", st.st_uid, st.st_gid, "")
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as fh:
        fh.write(content)
        fh.flush()
        os.fsync(fh.fileno())
    os.chmod(tmp, mode)
    chown_to(tmp, owner)
    os.replace(tmp, path)
