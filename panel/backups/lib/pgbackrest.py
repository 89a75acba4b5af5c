"""pgBackRest's side of a cluster's backups, as text and dataclasses (pure, no Django).

``render_config`` writes a cluster's own ``pgbackrest.conf`` (one stanza, one repository),
``archive_settings`` the PostgreSQL settings that push its WAL there, ``command`` the argument
list of one pgBackRest call, and ``parse_info`` reads ``pgbackrest info --output=json`` (2.45)
into backups and the recovery window.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field

STANZA = "main"
PROGRAM = "pgbackrest"
# Full backups are kept for this many days (with the differentials and WAL they need).
RETENTION_DAYS = 7
# Seconds after which an idle cluster switches WAL segments anyway: the recovery point objective.
ARCHIVE_TIMEOUT = 60
# The weekday (Monday = 0) of the weekly full backup; the other days take a differential one.
FULL_WEEKDAY = 6

BACKUP_TYPES = ("full", "diff", "incr")

_SAFE_VALUE = re.compile(r"[^\n\r\x00]*")
_TIME_RE = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,3})?\+00")


@dataclass(frozen=True)
class S3Repository:
    """An S3-compatible repository (``repo1-type=s3``) shared by the clusters of several nodes."""

    endpoint: str
    bucket: str
    region: str
    key: str
    key_secret: str
    path: str = "/pgbackrest"
    verify_tls: bool = True
    uri_style: str = "host"
    port: int | None = None


@dataclass(frozen=True)
class RepoConfig:
    """Where one cluster's backups go and what pgBackRest needs to reach its server."""

    repo_path: str
    log_path: str
    lock_path: str
    pg_path: str
    pg_port: int
    pg_socket_path: str
    pg_user: str
    retention_days: int = RETENTION_DAYS
    s3: S3Repository | None = None


def _value(value: str) -> str:
    if not _SAFE_VALUE.fullmatch(value):
        raise ValueError(f"cannot be written to pgbackrest.conf: {value!r}")
    return value


def render_config(conf: RepoConfig, stanza: str = STANZA) -> str:
    """The cluster's ``pgbackrest.conf``: one repository, time-based retention, lz4 compression."""
    lines = [
        "# Written by the control panel; edits here are overwritten.",
        "[global]",
        f"log-path={_value(conf.log_path)}",
        f"lock-path={_value(conf.lock_path)}",
        f"spool-path={_value(conf.lock_path)}",
        "log-level-console=warn",
        "log-level-stderr=error",
        "log-level-file=info",
        "compress-type=lz4",
        "start-fast=y",
        "process-max=1",
        "repo1-retention-full-type=time",
        f"repo1-retention-full={int(conf.retention_days)}",
    ]
    if conf.s3 is None:
        lines.append(f"repo1-path={_value(conf.repo_path)}")
    else:
        s3 = conf.s3
        lines += [
            "repo1-type=s3",
            f"repo1-path={_value(s3.path.rstrip('/') + '/' + conf.repo_path.strip('/'))}",
            f"repo1-s3-endpoint={_value(s3.endpoint)}",
            f"repo1-s3-bucket={_value(s3.bucket)}",
            f"repo1-s3-region={_value(s3.region)}",
            f"repo1-s3-key={_value(s3.key)}",
            f"repo1-s3-key-secret={_value(s3.key_secret)}",
            f"repo1-s3-uri-style={_value(s3.uri_style)}",
            f"repo1-storage-verify-tls={'y' if s3.verify_tls else 'n'}",
        ]
        if s3.port:
            lines.append(f"repo1-storage-port={int(s3.port)}")
    lines += [
        "",
        f"[{stanza}]",
        f"pg1-path={_value(conf.pg_path)}",
        f"pg1-port={int(conf.pg_port)}",
        f"pg1-socket-path={_value(conf.pg_socket_path)}",
        f"pg1-user={_value(conf.pg_user)}",
    ]
    return "\n".join(lines) + "\n"


def _conf_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def archive_command(program: str, config_path: str, stanza: str = STANZA) -> str:
    """The ``archive_command``: absolute paths the panel chose, no user input, ``%p`` last."""
    for part in (program, config_path):
        if not re.fullmatch(r"/[A-Za-z0-9_./-]+", part):
            raise ValueError(f"not a plain absolute path: {part!r}")
    return f"{program} --config={config_path} --stanza={stanza} archive-push %p"


def archive_settings(program: str, config_path: str, stanza: str = STANZA) -> str:
    """The PostgreSQL settings (``backup.conf``, included after the owner's settings) that archive
    every WAL segment to the cluster's repository, at least every ARCHIVE_TIMEOUT seconds."""
    return (
        "# Written by the control panel (backups); edits here are overwritten.\n"
        "wal_level = replica\n"
        "archive_mode = on\n"
        f"archive_command = {_conf_string(archive_command(program, config_path, stanza))}\n"
        f"archive_timeout = {ARCHIVE_TIMEOUT}\n"
    )


def command(program: str, config_path: str, action: str, *options: str, stanza: str = STANZA) -> list[str]:
    """One pgBackRest call as an argument list (no shell)."""
    return [program, f"--config={config_path}", f"--stanza={stanza}", *options, action]


def backup_type_for(day: dt.date, has_full: bool) -> str:
    """The scheduled backup's type: full on FULL_WEEKDAY (or when there is none), else differential."""
    if not has_full or day.weekday() == FULL_WEEKDAY:
        return "full"
    return "diff"


def target_time(moment: dt.datetime) -> str:
    """A recovery target pgBackRest and PostgreSQL both read: UTC, milliseconds, ``+00``."""
    if moment.tzinfo is None:
        raise ValueError("the recovery target needs a time zone")
    utc = moment.astimezone(dt.UTC)
    text = utc.strftime("%Y-%m-%d %H:%M:%S.") + f"{utc.microsecond // 1000:03d}+00"
    assert _TIME_RE.fullmatch(text)
    return text


# --- pgbackrest info --output=json -------------------------------------------------------------


@dataclass(frozen=True)
class BackupSet:
    """One backup in the repository."""

    label: str
    type: str
    started_at: dt.datetime
    stopped_at: dt.datetime
    size: int  # of the database
    delta: int
    repo_size: int  # what the repository holds for it (compressed)
    repo_delta: int
    wal_start: str
    wal_stop: str
    prior: str | None
    error: bool


@dataclass(frozen=True)
class RunningBackup:
    """A backup in progress, as ``info`` shows it from the lock (2.45: bytes done of the total)."""

    size: int
    done: int

    @property
    def percent(self) -> int | None:
        """None until pgBackRest knows the total (at the start, only ``held`` is shown)."""
        return min(100, int(100 * self.done / self.size)) if self.size else None


@dataclass(frozen=True)
class StanzaInfo:
    """The stanza's backups, oldest first, its archived WAL range and its status."""

    backups: list[BackupSet] = field(default_factory=list)
    wal_min: str = ""
    wal_max: str = ""
    status_code: int = 0
    status_message: str = ""
    running: RunningBackup | None = None

    @property
    def exists(self) -> bool:
        # 1: missing stanza path; 2: no valid backups (the stanza exists).
        return self.status_code != 1

    def window_start(self) -> dt.datetime | None:
        """The earliest moment a restore can reach: the end of the oldest good backup."""
        good = [b for b in self.backups if not b.error]
        return min(b.stopped_at for b in good) if good else None

    def latest(self) -> BackupSet | None:
        good = [b for b in self.backups if not b.error]
        return good[-1] if good else None


def _stamp(seconds: object) -> dt.datetime:
    return dt.datetime.fromtimestamp(int(seconds), tz=dt.UTC)  # type: ignore[call-overload]


def parse_info(text: str, stanza: str = STANZA) -> StanzaInfo:
    """``pgbackrest info --output=json`` for one stanza. Empty or missing: no stanza."""
    data = json.loads(text or "[]")
    entry = next((item for item in data if item.get("name") == stanza), None)
    if entry is None:
        return StanzaInfo(status_code=1, status_message="missing stanza")
    backups = []
    for item in entry.get("backup", []):
        info = item.get("info", {})
        repo = info.get("repository", {})
        archive = item.get("archive") or {}
        backups.append(
            BackupSet(
                label=item["label"],
                type=item["type"],
                started_at=_stamp(item["timestamp"]["start"]),
                stopped_at=_stamp(item["timestamp"]["stop"]),
                size=int(info.get("size", 0)),
                delta=int(info.get("delta", 0)),
                repo_size=int(repo.get("size", 0)),
                repo_delta=int(repo.get("delta", 0)),
                wal_start=archive.get("start") or "",
                wal_stop=archive.get("stop") or "",
                prior=item.get("prior"),
                error=bool(item.get("error", False)),
            )
        )
    backups.sort(key=lambda b: b.started_at)
    archives = entry.get("archive", [])
    wal_min = min((a.get("min") or "" for a in archives if a.get("min")), default="")
    wal_max = max((a.get("max") or "" for a in archives if a.get("max")), default="")
    status = entry.get("status", {})
    running = None
    lock = (status.get("lock") or {}).get("backup") or {}
    if lock.get("held"):
        running = RunningBackup(size=int(lock.get("size") or 0), done=int(lock.get("size-cp") or 0))
    return StanzaInfo(
        backups=backups,
        wal_min=wal_min,
        wal_max=wal_max,
        status_code=int(status.get("code", 0)),
        status_message=str(status.get("message", "")),
        running=running,
    )


def error_text(stderr: str, stdout: str = "", returncode: int = 0) -> str:
    """pgBackRest's own words for a failure: its ERROR lines (stderr first), else the last lines."""
    lines = [line.strip() for line in (stderr + "\n" + stdout).splitlines() if line.strip()]
    errors = [line for line in lines if "ERROR" in line or "HINT" in line]
    chosen = errors or lines[-3:]
    return " ".join(chosen) if chosen else f"pgbackrest exited with code {returncode}"


def in_window(moment: dt.datetime, start: dt.datetime | None, end: dt.datetime) -> bool:
    return start is not None and start <= moment <= end
