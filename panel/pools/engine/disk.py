"""PgBouncer's files for one cluster: where they are, written atomically and privately, its log read back.

Every file is a 0600 file of the cluster's OS user in a 0700 directory of that user, written with
a rename so PgBouncer never reads half a file. ``install`` keeps the files in force as ``.prev``
and ``restore_previous`` puts them back: the rollback of a change PgBouncer did not take.
Nothing here starts or signals a process (that is ``supervisor``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from panel.clusters.models import Cluster
from panel.core import runas
from panel.core.runas import OsUser
from panel.pools.lib.admin_console import parse_log_errors


@dataclass(frozen=True)
class BouncerFiles:
    """Where one cluster's PgBouncer keeps its files, and where it listens."""

    directory: Path
    socket_dir: Path
    port: int
    # The cluster's OS user (Cluster.os_user_name); blank: the global runner (postgres.os_user).
    os_user_name: str = ""

    @property
    def owner(self) -> OsUser:
        """Who runs this PgBouncer and owns its files (EngineError if that user is gone)."""
        return runas.os_user_named(self.os_user_name)

    @property
    def ini(self) -> Path:
        return self.directory / "pgbouncer.ini"

    @property
    def auth(self) -> Path:
        return self.directory / "userlist.txt"

    @property
    def hba(self) -> Path:
        return self.directory / "pgbouncer_hba.conf"

    @property
    def pidfile(self) -> Path:
        return self.directory / "pgbouncer.pid"

    @property
    def logfile(self) -> Path:
        return self.directory / "pgbouncer.log"

    @property
    def tls_cert(self) -> Path:
        return self.directory / "server.crt"

    @property
    def tls_key(self) -> Path:
        return self.directory / "server.key"

    @property
    def socket_path(self) -> Path:
        return self.socket_dir / f".s.PGSQL.{self.port}"

    @staticmethod
    def previous(path: Path) -> Path:
        return path.with_name(path.name + ".prev")


def bouncer_files(cluster: Cluster) -> BouncerFiles:
    # The cluster's own socket directory keeps the socket path short (< 100 bytes); PostgreSQL's
    # socket there uses another port number.
    return BouncerFiles(
        cluster.data_root / "pgbouncer",
        cluster.socket_dir,
        int(cluster.pooler_port or 0),
        cluster.os_user_name,
    )


def prepare_directory(files: BouncerFiles) -> None:
    runas.make_private_dir(files.directory, files.owner)


def write_file(files: BouncerFiles, path: Path, content: str) -> None:
    """A 0600 file of PgBouncer's user, written atomically."""
    runas.write_private_file(path, content, owner=files.owner)


def copy_private(files: BouncerFiles, source: Path, target: Path) -> None:
    """Copy a file (the cluster's TLS certificate and key) as a 0600 file of PgBouncer's user."""
    content = source.read_text()
    try:
        if target.read_text() == content:
            return
    except OSError:
        pass
    write_file(files, target, content)


def read_text(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def install(files: BouncerFiles, ini: str, auth: str, hba: str | None = None) -> None:
    """Write the files atomically, keeping the current ones as ``.prev`` for a rollback.

    The auth and hba files go first: a new pool's user must be known, and the trusted sources in
    place, when the new ``pgbouncer.ini`` is loaded.
    """
    wanted = [(files.auth, auth), (files.ini, ini)]
    if hba is not None:
        wanted.insert(0, (files.hba, hba))
    for path, content in wanted:
        current = read_text(path)
        previous = files.previous(path)
        if current is None:
            previous.unlink(missing_ok=True)
        else:
            write_file(files, previous, current)
        write_file(files, path, content)


def restore_previous(files: BouncerFiles) -> bool:
    """Put the ``.prev`` files back; False when there were none (the first configuration)."""
    restored = False
    for path in (files.ini, files.auth, files.hba):
        previous = files.previous(path)
        content = read_text(previous)
        if content is None:
            path.unlink(missing_ok=True)
        else:
            write_file(files, path, content)
            restored = True
    return restored


# --- the log -----------------------------------------------------------------------------------


def log_size(files: BouncerFiles) -> int:
    try:
        return files.logfile.stat().st_size
    except FileNotFoundError:
        return 0


def log_problems(files: BouncerFiles, since: int) -> list[str]:
    """WARNING/ERROR/FATAL lines PgBouncer logged since byte ``since``, the worst first."""
    try:
        with open(files.logfile, "rb") as fh:
            fh.seek(since)
            text = fh.read().decode(errors="replace")
    except FileNotFoundError:
        return []
    problems = parse_log_errors(text)
    # Client-side warnings (a client gone, a bad password) say nothing about the configuration.
    problems = [line for line in problems if " C-0x" not in line and " S-0x" not in line]
    rank = {"FATAL": 0, "ERROR": 1, "WARNING": 2}

    def level(line: str) -> int:
        return min((rank[word] for word in rank if f"] {word} " in line), default=3)

    return sorted(problems, key=level)
