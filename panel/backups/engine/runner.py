"""The pgBackRest runner: the only module that spawns pgBackRest.

Each cluster has its own configuration, repository, log and lock directories under
``PANEL_DATA_DIR/backups/<cluster id>/`` (0700, the cluster's system user), outside the cluster's
data root so that a deleted cluster's backups can be kept for their retention period. pgBackRest
runs as the cluster's user, from an argument list, with a timeout; it logs in to the server over
the cluster's socket as a role of its own by peer authentication (``login``): no password of any
role is in its files. A restore runs as the source cluster's user too (issue 29):
that user may write its repository, so root never reads it; the restored files are then given to
the new cluster's user.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from panel import crypto
from panel.backups.engine import login
from panel.backups.lib import pgbackrest
from panel.clusters.face import isolation, postgres
from panel.clusters.models import Cluster
from panel.clusters.models.servers import server_port
from panel.core import runas
from panel.core.runas import EngineError, OsUser

log = logging.getLogger(__name__)

# What PostgreSQL reads after the owner's settings.conf (panel/clusters/services/provision.py).
SERVER_FILE = "backup.conf"


@dataclass(frozen=True)
class Paths:
    """A cluster's backup files."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / "pgbackrest.conf"

    @property
    def passfile(self) -> Path:
        return self.root / "pgpass"

    @property
    def repo(self) -> Path:
        return self.root / "repo"

    @property
    def log_dir(self) -> Path:
        return self.root / "log"

    @property
    def lock_dir(self) -> Path:
        return self.root / "lock"


def backups_dir() -> Path:
    return Path(settings.PANEL_DATA_DIR) / "backups"


def paths_for(cluster_id_hex: str) -> Paths:
    return Paths(backups_dir() / cluster_id_hex)


def paths(cluster: Cluster) -> Paths:
    return paths_for(cluster.id.hex)


def program() -> str:
    found = shutil.which(settings.PANEL_PGBACKREST) if not os.path.isabs(settings.PANEL_PGBACKREST) else None
    path = found or settings.PANEL_PGBACKREST
    if not os.path.isfile(path):
        raise EngineError(
            f"pgBackRest was not found ({settings.PANEL_PGBACKREST}); install the 'pgbackrest' package."
        )
    return path


def s3_repository() -> pgbackrest.S3Repository | None:
    """The S3-compatible repository the settings name (None: each cluster's local one)."""
    if not settings.PANEL_BACKUP_S3_ENDPOINT:
        return None
    host, _sep, port = settings.PANEL_BACKUP_S3_ENDPOINT.partition(":")
    return pgbackrest.S3Repository(
        endpoint=host,
        port=int(port) if port else None,
        bucket=settings.PANEL_BACKUP_S3_BUCKET,
        region=settings.PANEL_BACKUP_S3_REGION,
        key=settings.PANEL_BACKUP_S3_KEY,
        key_secret=crypto.decrypt(settings.PANEL_BACKUP_S3_KEY_SECRET_ENCRYPTED),
        path=settings.PANEL_BACKUP_S3_PATH,
        verify_tls=settings.PANEL_BACKUP_S3_VERIFY_TLS,
        uri_style=settings.PANEL_BACKUP_S3_URI_STYLE,
    )


def repo_config(cluster: Cluster, where: Paths) -> pgbackrest.RepoConfig:
    s3 = s3_repository()
    return pgbackrest.RepoConfig(
        # In a bucket: a prefix of the cluster's own (the bucket is shared by every node).
        repo_path=cluster.id.hex if s3 else str(where.repo),
        s3=s3,
        log_path=str(where.log_dir),
        lock_path=str(where.lock_dir),
        pg_path=str(cluster.pgdata),
        pg_port=server_port(cluster),
        pg_socket_path=str(cluster.socket_dir),
        pg_user=settings.PANEL_BACKUP_ROLE,
    )


def write_files(cluster: Cluster, user: OsUser) -> Paths:
    """The cluster's pgbackrest.conf and directories, and the archiving settings in its data
    directory (``backup.conf``), each written atomically where it changed; the passfile of
    before (it held the panel's superuser password) removed."""
    where = paths(cluster)
    for directory in (backups_dir(),):
        directory.mkdir(parents=True, exist_ok=True)
        os.chmod(directory, 0o711)
    runas.make_private_dir(where.root, user)
    for directory in (where.repo, where.log_dir, where.lock_dir):
        runas.make_private_dir(directory, user)
    _write_if_changed(where.config, pgbackrest.render_config(repo_config(cluster, where)), user)
    remove_passfile(cluster)
    _write_if_changed(
        cluster.pgdata / SERVER_FILE, pgbackrest.archive_settings(program(), str(where.config)), user
    )
    return where


def remove_passfile(cluster: Cluster) -> bool:
    """The passfile earlier panels wrote for pgBackRest (the panel's superuser password, readable
    by the cluster's OS user) removed; True if there was one."""
    try:
        paths(cluster).passfile.unlink()
    except FileNotFoundError:
        return False
    return True


def _write_if_changed(path: Path, content: str, user: OsUser) -> None:
    try:
        if path.read_text() == content:
            return
    except OSError:
        pass
    runas.write_private_file(path, content, owner=user)


# A full backup's directory in the repository (its label); others build on one.
_FULL_LABEL = re.compile(r"[0-9]{8}-[0-9]{6}F")


def has_backup(cluster: Cluster) -> bool:
    """Whether the cluster's repository holds a full backup to restore from: the local one's
    directory names are the labels (only names are read); a bucket is pgBackRest's to say."""
    if s3_repository() is not None:
        return True
    folder = paths(cluster).repo / "backup" / pgbackrest.STANZA
    try:
        return any(
            _FULL_LABEL.fullmatch(entry.name)
            for entry in os.scandir(folder)
            if entry.is_dir(follow_symlinks=False)
        )
    except OSError:
        return False


def stanza_command(cluster: Cluster) -> list[str]:
    """pgBackRest on the cluster's configuration and stanza, without an action."""
    return pgbackrest.command(program(), str(paths(cluster).config), "")[:-1]


# The actions that log in to the server (archive-push, archive-get, restore, info do not).
LOGS_IN = frozenset({"stanza-create", "stanza-upgrade", "backup", "check"})


def run(cluster: Cluster, action: str, *options: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """One pgBackRest call on the cluster's stanza, as its user."""
    where = paths(cluster)
    argv = pgbackrest.command(program(), str(where.config), action, *options)
    if action in LOGS_IN:
        login.ensure_backup_role(cluster)
    remove_passfile(cluster)
    return runas.run_as(
        isolation.os_user(cluster), argv, timeout=timeout, cwd=where.root, env=primary_env(cluster)
    )


def primary_env(cluster: Cluster) -> dict[str, str]:
    """With standbys the primary moves (failover, switchover) while the configuration names the
    member that was primary when it was written: pgBackRest is pointed at the one that is primary
    now (the environment overrides the file), so backups follow it as archiving does."""
    if not cluster.is_ha:
        return {}
    primary = cluster.members.filter(role="primary").first()
    if primary is None:
        return {}
    return {"PGBACKREST_PG1_PATH": primary.data_dir, "PGBACKREST_PG1_PORT": str(primary.port)}


def check(result: subprocess.CompletedProcess[str], what: str) -> None:
    if result.returncode != 0:
        raise EngineError(
            f"{what} failed: {pgbackrest.error_text(result.stderr, result.stdout, result.returncode)}"
        )


def info(cluster: Cluster, *, timeout: float = 30) -> pgbackrest.StanzaInfo:
    if not paths(cluster).config.is_file():
        return pgbackrest.StanzaInfo(status_code=1, status_message="not configured")
    result = run(cluster, "info", "--output=json", timeout=timeout)
    check(result, "pgbackrest info")
    return pgbackrest.parse_info(result.stdout)


def restore(source: Cluster, pgdata: Path, scratch: Path, options: list[str], *, timeout: float) -> None:
    """``pgbackrest restore`` of the source's stanza into ``pgdata`` (an empty directory), as the
    source cluster's user, who can read its repository and write only what it is given here:
    ``pgdata`` and ``scratch`` (this run's locks and logs) become its own, 0700; the caller makes
    their parent traversable for the run and gives the files to the new cluster's user after."""
    where = paths(source)
    user = isolation.os_user(source)
    for directory in (scratch, scratch / "lock", scratch / "log"):
        runas.make_private_dir(directory, user)
    runas.chown_to(pgdata, user)
    os.chmod(pgdata, 0o700)
    argv = pgbackrest.command(
        program(),
        str(where.config),
        "restore",
        f"--pg1-path={pgdata}",
        f"--lock-path={scratch / 'lock'}",
        f"--log-path={scratch / 'log'}",
        "--log-level-file=off",
        *options,
    )
    result = runas.run_as(user, argv, timeout=timeout, cwd=scratch)
    check(result, "pgbackrest restore")


def copy_archive(source: Cluster, destination: Path, first_segment: str) -> None:
    """The source's archived WAL from ``first_segment`` on (and its history files), copied into a
    repository of the new cluster's own: its server replays them as its own user, who may not
    read the source's repository."""
    origin = paths(source).repo / "archive" / pgbackrest.STANZA
    target = destination / "archive" / pgbackrest.STANZA

    def ignore(directory: str, names: list[str]) -> set[str]:
        if Path(directory) == origin:
            return set()
        return {
            name
            for name in names
            if not os.path.isdir(os.path.join(directory, name))
            and not name.endswith(".history")
            and name[:24] < first_segment[:24]
        }

    # Symbolic links the source's user may have put in its repository are copied as links, never
    # followed by root (they would then be given to the new cluster's user with what they name).
    shutil.copytree(origin, target, ignore=ignore, symlinks=True)


def restore_config(repo: Path, scratch: Path, pgdata: Path, source: Cluster | None = None) -> str:
    """The configuration a restored server's ``restore_command`` reads (archive-get only): the
    local copy of the WAL, or, with an S3 repository, the source's prefix in the bucket."""
    if source is not None and s3_repository() is not None:
        conf = repo_config(source, paths(source))
        return pgbackrest.render_config(
            pgbackrest.RepoConfig(
                repo_path=conf.repo_path,
                log_path=str(scratch / "log"),
                lock_path=str(scratch / "lock"),
                pg_path=str(pgdata),
                pg_port=conf.pg_port,
                pg_socket_path=conf.pg_socket_path,
                pg_user=conf.pg_user,
                s3=conf.s3,
            )
        )
    return (
        "[global]\n"
        f"repo1-path={repo}\n"
        f"log-path={scratch / 'log'}\n"
        f"lock-path={scratch / 'lock'}\n"
        "log-level-console=warn\n"
        "log-level-file=off\n"
        f"\n[{pgbackrest.STANZA}]\n"
        f"pg1-path={pgdata}\n"
    )


def remove(cluster_id_hex: str) -> None:
    postgres.remove_data(paths_for(cluster_id_hex).root)


def repository_bytes(cluster: Cluster) -> int:
    """Bytes of the cluster's local repository (WAL archived, backups), which sits on its node's
    disk and counts against the plan's disk (0 with an S3 repository, or none yet)."""
    if s3_repository() is not None:
        return 0
    total = 0
    for directory, _dirs, files in os.walk(paths(cluster).repo):
        for name in files:
            with contextlib.suppress(OSError):  # expired meanwhile
                total += os.lstat(os.path.join(directory, name)).st_size
    return total
