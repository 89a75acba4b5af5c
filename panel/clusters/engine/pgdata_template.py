"""A new cluster's data directory copied from one made once, instead of an initdb per cluster.

``PANEL_PGDATA_TEMPLATE`` (off by default; on in the tests, where a run makes a hundred clusters
and initdb is most of what each costs): the first cluster of a PostgreSQL version runs initdb as
usual, with a throwaway superuser password, into ``<data dir>/templates/pg<version>/pgdata``,
which then belongs to the panel (0700; no cluster's user can write in it, so nothing a cluster
runs reaches a later cluster through it). Every cluster after it gets a copy, owned by its own
user, whose superuser password is set in single-user mode before the server first listens: the
panel's secret reaches the server as a SCRAM verifier on standard input, never as text.

Copies share the template's system identifier (initdb's; PostgreSQL 15 cannot set another), which
is why this is not the default: a panel whose clusters must tell each other apart by it (each
cluster's pgBackRest repository and Patroni scope are its own either way) keeps initdb per cluster.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import shutil
from pathlib import Path

from django.conf import settings
from psycopg import sql

from panel.clusters.engine import postgres
from panel.core import scram
from panel.core.runas import EngineError, OsUser, run_as

READY = "READY"


def initdb(
    version: str, pgdata: Path, superuser: str, password: str, *, user: OsUser, timeout: float
) -> None:
    """``postgres.initdb``, from the template when ``PANEL_PGDATA_TEMPLATE`` is on."""
    if not settings.PANEL_PGDATA_TEMPLATE:
        postgres.initdb(version, pgdata, superuser, password, user=user, timeout=timeout)
        return
    template = ensure(version, superuser, pgdata.parent, user=user, timeout=timeout)
    postgres.make_data_root(pgdata.parent, user)
    shutil.copytree(template, pgdata, symlinks=True)
    postgres.chown_tree(pgdata, user)
    set_superuser_password(version, pgdata, superuser, password, user=user, timeout=timeout)


def template_dir(version: str, superuser: str) -> Path:
    return Path(settings.PANEL_DATA_DIR) / "templates" / f"pg{version}-{superuser}"


def ensure(version: str, superuser: str, workspace: Path, *, user: OsUser, timeout: float) -> Path:
    """The template's data directory, made first if there is none (one maker at a time: a lock
    file beside it). initdb refuses root, so it runs as the new cluster's user in its
    ``workspace`` (its data root); the result is then moved and handed to the panel."""
    root = template_dir(version, superuser)
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (root / READY).exists():
            return root / "pgdata"
        shutil.rmtree(root / "pgdata", ignore_errors=True)  # a maker that died half way
        build = workspace / "template-pgdata"
        postgres.initdb(version, build, superuser, secrets.token_urlsafe(24), user=user, timeout=timeout)
        build.rename(root / "pgdata")
        if os.geteuid() == 0:  # the panel's (root's) from now on, as the rest of its data directory
            for path in [root / "pgdata", *(root / "pgdata").rglob("*")]:
                os.chown(path, 0, 0, follow_symlinks=False)
        (root / READY).write_text(version + "\n")
    return root / "pgdata"


def set_superuser_password(
    version: str, pgdata: Path, superuser: str, password: str, *, user: OsUser, timeout: float
) -> None:
    """ALTER ROLE in single-user mode (no socket, no port: nobody else is connected)."""
    statement = sql.SQL("ALTER ROLE {} PASSWORD {}").format(
        sql.Identifier(superuser), sql.Literal(scram.verifier(password))
    )
    command = [str(postgres.bindir_for(version) / "postgres"), "--single", "-D", str(pgdata), "postgres"]
    result = run_as(user, command, timeout=timeout, cwd=pgdata.parent, input=statement.as_string() + ";\n")
    if result.returncode != 0 or "ERROR:" in result.stderr + result.stdout:
        # What the server said names the statement, whose verifier is the superuser's secret.
        raise EngineError(
            f"Setting the superuser's password in the copied data directory failed (exit {result.returncode})."
        )
