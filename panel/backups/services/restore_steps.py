"""The steps of a restore on the source's node, in order: the new cluster's data directory from
``pgbackrest restore`` instead of initdb, the WAL to replay, its own files, certificates and
configuration, the replay to the target and the promotion, its own secrets and the panel's rows,
its own stanza and first backup (see ``restore`` for the whole way and its checks).
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.translation import gettext as _

from panel import crypto
from panel.backups.engine import runner as engine
from panel.backups.lib import pgbackrest
from panel.backups.models import BackupJob
from panel.backups.services import cluster_hooks
from panel.clusters.face import dbconn, isolation, new_password, panel_roles, postgres, provision, transitions
from panel.clusters.lib.pgconf import QUOTA_FILE
from panel.clusters.models import Cluster, Database, DatabaseUser
from panel.core import runas
from panel.core.errors import N_, Message, Term, When
from panel.core.runas import EngineError

_START_WAL = re.compile(r"START WAL LOCATION: \S+ \(file ([0-9A-F]{24})\)")
# What pgBackRest writes into postgresql.auto.conf for the recovery; reset once promoted.
RECOVERY_SETTINGS = ("restore_command", "recovery_target_time", "recovery_target_action", "recovery_target")


def run_steps(job: BackupJob, source: Cluster, new: Cluster) -> None:
    """The worker's steps, from the source's sealed WAL to the new cluster online (raises on any
    failure; ``restore.perform_restore`` then removes what was made)."""
    timeout = settings.PANEL_COMMAND_TIMEOUT
    steps = provision.Provisioning(new)

    transitions.set_progress(new, 5, _("Preparing"))
    # The restored server's roles have the source's passwords until ``own secrets`` below.
    steps.user = provision.prepare_copy(new, source)

    transitions.set_progress(new, 10, _("Archiving the source's latest WAL"))
    seal_source(source)

    transitions.set_progress(new, 20, _("Restoring the backup (pgbackrest restore)"))
    postgres.make_data_root(new.data_root, steps.user)
    runas.make_private_dir(new.pgdata, steps.user)
    scratch = new.data_root / "restore"
    if job.target_time is not None:
        options = [
            "--type=time",
            f"--target={pgbackrest.target_time(job.target_time)}",
            "--target-action=promote",
        ]
    else:
        options = ["--type=default"]
    # pgBackRest runs as the source's user (engine.restore), which passes through the new data
    # root to what it is given there; closed again as soon as it exits, before root touches any
    # file it wrote, and those become the new cluster's user's.
    os.chmod(new.data_root, 0o711)
    try:
        engine.restore(source, new.pgdata, scratch, options, timeout=settings.PANEL_BACKUP_TIMEOUT)
    finally:
        os.chmod(new.data_root, 0o700)
    postgres.chown_tree(new.data_root, steps.user)

    transitions.set_progress(new, 50, _("Copying the WAL to replay"))
    label = (new.pgdata / "backup_label").read_text()
    match = _START_WAL.search(label)
    if match is None:
        raise EngineError("The restored backup has no start WAL location in its backup_label.")
    if engine.s3_repository() is None:
        engine.copy_archive(source, scratch / "repo", match.group(1))
    (scratch / "pgbackrest.conf").write_text(
        engine.restore_config(scratch / "repo", scratch, new.pgdata, source)
    )
    _point_restore_command(new, scratch)
    _plain_config(source, new)
    # The source's storage-quota stops are not the new cluster's (it has no quotas yet).
    (new.pgdata / QUOTA_FILE).unlink(missing_ok=True)
    postgres.chown_tree(new.data_root, steps.user)

    transitions.set_progress(new, 60, _("Generating TLS certificates"))
    provision.write_certificates(steps)
    transitions.set_progress(new, 65, _("Writing the configuration"))
    provision.write_server_config(new)

    transitions.set_progress(new, 70, _("Starting PostgreSQL and replaying the WAL"))
    runas.make_private_dir(new.socket_dir, steps.user)
    isolation.start_server(new, steps.user, timeout)
    wait_promoted(new, settings.PANEL_BACKUP_TIMEOUT)
    with dbconn.admin_connection(new) as conn:
        for name in RECOVERY_SETTINGS:
            conn.execute(f"ALTER SYSTEM RESET {name}")
        conn.execute("SELECT pg_catalog.pg_reload_conf()")
    shutil.rmtree(scratch, ignore_errors=True)

    transitions.set_progress(new, 85, _("Setting the cluster's own secrets"))
    own_secrets(new)
    transitions.set_progress(new, 90, _("Recording the users and databases"))
    copy_rows(source, new)
    isolation.refresh_server_auth(new)

    transitions.set_progress(new, 95, _("Creating the cluster's own backup stanza"))
    archived = cluster_hooks.prepare_repository(new)
    transitions.mark_online(new)
    origin = new.restore_origin
    when: Message | Term = (
        Message(N_("%(moment)s UTC"), moment=When.of(origin.target_time))
        if origin.target_time
        else Term(N_("the latest point"))
    )
    transitions.log_event(
        new,
        "restored",
        Message(
            N_("Restored from “%(source)s” at %(when)s; online on port %(port)s."),
            source=source.name,
            when=when,
            port=new.port,
        ),
    )
    transitions.log_event(
        source,
        "restored-into",
        Message(N_("Restored into “%(name)s” at %(when)s."), name=new.name, when=when),
    )
    if archived:  # online now: its own first backup (a restore to a moment needs one of its own)
        cluster_hooks.queue_first_backup(new)


def seal_source(source: Cluster) -> None:
    """A commit on the source now, and its WAL segment archived (``pgbackrest check`` switches
    the segment and waits for it): the replay finds a record past any chosen moment, and a fork
    gets everything committed until now. Nothing of the source's data changes."""
    with dbconn.admin_connection(source) as conn:
        conn.execute("SELECT pg_catalog.txid_current()")
    result = engine.run(source, "check", timeout=settings.PANEL_COMMAND_TIMEOUT)
    engine.check(result, "pgbackrest check")


_PANEL_INCLUDE = re.compile(r"include_if_exists = '[^'\n]*/panel\.conf'")


def _plain_config(source: Cluster, new: Cluster) -> None:
    """A backup taken on a member of a cluster with standbys holds Patroni's postgresql.conf,
    whose settings (ports, socket and pg_hba paths) are the source member's: the new cluster gets
    initdb's as Patroni kept it (``ha/postgresql.base.conf``), else only the panel's include."""
    conf = new.pgdata / "postgresql.conf"
    if provision.INCLUDE_LINE in conf.read_text():
        return
    base = source.data_root / "ha" / "postgresql.base.conf"
    text = base.read_text() if base.is_file() else ""
    text = _PANEL_INCLUDE.sub(lambda _match: provision.INCLUDE_LINE, text)
    if provision.INCLUDE_LINE not in text:
        text = text.rstrip("\n") + "\n\n" + provision.INCLUDE_LINE + "\n"
    conf.write_text(text)


def _point_restore_command(new: Cluster, scratch: Path) -> None:
    """pgBackRest wrote a restore_command reading the source's repository, which the new
    cluster's user may not read: point it at the copy in ``scratch``."""
    auto = new.pgdata / "postgresql.auto.conf"
    program = engine.program()
    command = f'{program} --config={scratch}/pgbackrest.conf --stanza={pgbackrest.STANZA} archive-get %f "%p"'
    lines = []
    for line in auto.read_text().splitlines():
        if line.startswith("restore_command"):
            line = "restore_command = '" + command.replace("'", "''") + "'"
        lines.append(line)
    auto.write_text("\n".join(lines) + "\n")


def wait_promoted(new: Cluster, timeout: float) -> None:
    """Until the replay ended and the server was promoted (or it stopped: its log says why)."""
    deadline = time.monotonic() + timeout
    beat = 0.0
    while time.monotonic() < deadline:
        if time.monotonic() - beat > 30:
            # A long replay is work in progress, not a stuck job (the reconciler's rule).
            Cluster.objects.filter(pk=new.pk).update(updated_at=timezone.now())
            beat = time.monotonic()
        if postgres.postmaster_pid(new.pgdata) is None:
            raise EngineError(f"PostgreSQL stopped during the replay: {_log_tail(new)}")
        try:
            with dbconn.admin_connection(new) as conn:
                row = conn.execute("SELECT pg_catalog.pg_is_in_recovery()").fetchone()
            if row is not None and not row[0]:
                return
        except dbconn.DatabaseError:
            pass
        time.sleep(0.5)
    raise EngineError(f"The replay did not end within {timeout:.0f} s.")


def _log_tail(new: Cluster, lines: int = 3) -> str:
    """The server's last FATAL/PANIC lines (why the replay stopped: a target not reached, …)."""
    try:
        text = new.log_file.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    important = [line for line in text if "FATAL" in line or "PANIC" in line]
    return " ".join((important or text)[-lines:])


def own_secrets(new: Cluster) -> None:
    """New passwords for the panel's own roles (they came with the restore as the source's)."""
    superuser_password = new_password()
    monitor_password = new_password()
    with dbconn.admin_connection(new) as conn:
        dbconn.set_password(conn, settings.PANEL_SUPERUSER, superuser_password)
        # The source's monitor password, which the restore's copy of the role still has.
        previous = crypto.decrypt(new.monitor_password_encrypted) if new.monitor_password_encrypted else ""
        panel_roles.ensure_monitor_role(conn, settings.PANEL_MONITOR_ROLE, monitor_password, previous)
    new.superuser_password_encrypted = crypto.encrypt(superuser_password)
    new.monitor_password_encrypted = crypto.encrypt(monitor_password)
    new.save(update_fields=["superuser_password_encrypted", "monitor_password_encrypted", "updated_at"])
    engine.write_files(new, isolation.os_user(new))  # pgBackRest's files for the new cluster


def copy_rows(source: Cluster, new: Cluster) -> None:
    """The panel's rows for the users and databases the restored server has: the source's rows
    of the same names (passwords as the panel shows them, set again so they hold)."""
    with dbconn.admin_connection(new) as conn:
        roles = {r for (r,) in conn.execute("SELECT rolname FROM pg_catalog.pg_roles").fetchall()}
        databases = {d for (d,) in conn.execute("SELECT datname FROM pg_catalog.pg_database").fetchall()}
        users = [u for u in source.users.all() if u.name in roles]
        for user in users:
            dbconn.set_password(conn, user.name, user.password)
    with transaction.atomic():
        for user in users:
            DatabaseUser.objects.create(
                cluster=new,
                name=user.name,
                password_encrypted=user.password_encrypted,
                is_protected=user.is_protected,
            )
        for database in source.databases.filter(name__in=databases):
            Database.objects.create(
                cluster=new,
                name=database.name,
                owner_name=database.owner_name,
                is_protected=database.is_protected,
            )
