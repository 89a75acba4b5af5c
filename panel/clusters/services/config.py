"""The owner's PostgreSQL settings: a safe subset (``panel/clusters/lib/tunables.py``) kept on the
cluster's row, rendered into ``PGDATA/settings.conf`` (which panel.conf includes last, so
``write_server_config`` and every restart keep it), applied with a reload, never a restart.

``update_config`` reads top to bottom: validate every change → record the row (inside the
cluster row's lock) → write the file atomically → reload → the same on members on other nodes
(through their agents) → verify from a new session on the primary (a reload answers success even
when PostgreSQL refused a value: it only logs it) → on any failure the previous file back in
force everywhere, the row rolled back with the transaction, a ServiceError.
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

from panel.clusters.engine import dbconn, isolation
from panel.clusters.lib import tunables
from panel.clusters.lib.pgconf import temp_file_limit_kb
from panel.clusters.models import Cluster, EventLevel
from panel.clusters.services import failures, transitions
from panel.clusters.services.lifecycle import require_local
from panel.clusters.services.provision import SETTINGS_FILE, owner_settings, write_server_config
from panel.clusters.standbys.services import remote_members
from panel.core import runas
from panel.core.agent import on_node
from panel.core.errors import N_, Message, ServiceError
from panel.core.runas import EngineError

log = logging.getLogger(__name__)


class NotTaken(Exception):
    """PostgreSQL runs with another value than the one written (it refused it, or overrides it);
    ``words`` says which, rendered where it is read (``failures.reason``)."""

    def __init__(self, words: Message) -> None:
        super().__init__(str(words))
        self.words = words


def current_config(cluster: Cluster) -> dict[str, tunables.Value]:
    """Every offered setting with the cluster's value (the owner's, or PostgreSQL's default)."""
    return tunables.effective(cluster.config)


def check_changes(changes: Any) -> dict[str, tunables.Value]:
    """The changes in their types, or a ServiceError naming every problem (its field: the first
    setting at fault, ``config`` for unknown names)."""
    if not isinstance(changes, dict):
        raise ServiceError(
            N_("The configuration is an object of setting names and values."),
            field="config",
            code="config.not_an_object",
            params={},
        )
    try:
        return tunables.validate(changes)
    except tunables.InvalidSettings as exc:
        problems = exc.problems
        field = next((name for name in problems if name != "unknown"), "config")
        raise ServiceError.joined(
            [
                Message(N_("%(setting)s: %(problem)s"), v.code, setting=k, problem=v)
                for k, v in problems.items()
            ],
            field,
            sep="; ",
        ) from None


def _include_in_force(cluster: Cluster) -> bool:
    try:
        text = (cluster.pgdata / "panel.conf").read_text()
    except OSError:
        return False
    return f"include_if_exists = '{SETTINGS_FILE}'" in text


def _write(cluster: Cluster) -> None:
    """settings.conf from the row; a panel.conf from before settings.conf gets its include."""
    if _include_in_force(cluster):
        runas.write_private_file(
            cluster.pgdata / SETTINGS_FILE, owner_settings(cluster), owner=isolation.os_user(cluster)
        )
    else:
        write_server_config(cluster)


def _verify(cluster: Cluster, values: dict[str, tunables.Value]) -> None:
    """What a new session sees (pg_settings, in PostgreSQL's base units) is what was written."""
    # Not the quiet log of the panel's other sessions: its logging settings are the session's own.
    with dbconn.admin_connection(cluster, quiet_log=False) as conn:
        rows = conn.execute(
            "SELECT lower(name), setting FROM pg_catalog.pg_settings WHERE lower(name) = ANY(%s)",
            [list(values)],
        ).fetchall()
    seen = dict(rows)
    for name, value in values.items():
        wanted = tunables.TUNABLES_BY_NAME[name].in_pg_settings(value)
        if seen.get(name) != wanted:
            raise NotTaken(
                Message(
                    N_("PostgreSQL did not take %(name)s = %(value)s (it runs with %(seen)s)."),
                    "config.not_taken",
                    name=name,
                    value=value,
                    seen=seen.get(name, "?"),
                )
            )


def _describe(values: dict[str, tunables.Value]) -> str:
    parts = []
    for name, value in sorted(values.items()):
        unit = tunables.TUNABLES_BY_NAME[name].unit
        parts.append(f"{name} = {value}" + (f" {unit}" if unit and not isinstance(value, bool) else ""))
    return ", ".join(parts)


@on_node(timeout=60)
def update_config(cluster: Cluster, changes: dict[str, Any]) -> dict[str, tunables.Value]:
    """Change some settings (the others keep their values) and return them all, once a new
    session runs with them; nothing changes when one value is refused."""
    require_local(cluster)
    values = check_changes(changes)
    _check_plan_bounds(cluster, values)
    transitions.require_serving(cluster, fresh=True, field="config")
    if not values:
        return current_config(cluster)
    path = cluster.pgdata / SETTINGS_FILE
    try:
        previous_text: str | None = path.read_text()
    except FileNotFoundError:
        previous_text = None
    try:
        with transaction.atomic():
            locked = Cluster.objects.select_for_update().get(pk=cluster.pk)
            locked.config = {**locked.config, **values}
            locked.save(update_fields=["config", "updated_at"])
            _write(locked)
            isolation.reload_server_config(locked)
            # Before the check: the primary may be a member on another node, which reads its own
            # copy (it rolls its members back when one fails; _restore when the check fails).
            remote_members.push_config(locked)
            _verify(locked, values)
    except (EngineError, dbconn.DatabaseError, OSError, NotTaken) as exc:
        _restore(cluster, previous_text)
        # pg_ctl's, the server's or the system's words name the cluster's files: the log's.
        log.warning("changing the configuration of %s failed: %s", cluster.pk, exc)
        reason = failures.reason(exc)
        transitions.log_event(
            cluster,
            "config-failed",
            Message(
                N_("The configuration was not changed (%(changes)s): %(reason)s"),
                changes=_describe(values),
                reason=reason,
            ),
            EventLevel.ERROR,
        )
        raise ServiceError(
            N_("The configuration was not changed: %(reason)s"),
            field="config",
            code="config.not_applied",
            params={"reason": reason},
        ) from None
    cluster.refresh_from_db(fields=["config"])
    transitions.log_event(
        cluster,
        "config-changed",
        Message(N_("Configuration changed: %(changes)s."), changes=_describe(values)),
    )
    return current_config(cluster)


def _check_plan_bounds(cluster: Cluster, values: dict[str, tunables.Value]) -> None:
    """Temporary files are bounded by the plan's disk (issue 29): the owner may only lower it."""
    wanted = values.get("temp_file_limit")
    if not isinstance(wanted, int) or isinstance(wanted, bool) or cluster.plan is None:
        return
    bound = temp_file_limit_kb(cluster.plan.disk_bytes, -1)
    if wanted < 0 or wanted > bound:
        raise ServiceError(
            N_("temp_file_limit: at most %(bound)s kB on this plan (a tenth of its disk per session)."),
            field="temp_file_limit",
            code="config.temp_file_limit_over_plan",
            params={"bound": bound},
        )


def _restore(cluster: Cluster, previous_text: str | None) -> None:
    """The previous settings.conf back in force (the row rolled back with the transaction)."""
    path = cluster.pgdata / SETTINGS_FILE
    try:
        if previous_text is None:
            path.unlink(missing_ok=True)
        else:
            runas.write_private_file(path, previous_text, owner=isolation.os_user(cluster))
        isolation.reload_server_config(cluster)
        remote_members.push_config(cluster)  # members on other nodes that took it: back too
    except (EngineError, dbconn.DatabaseError, OSError) as exc:
        log.warning("restoring the configuration of %s failed: %s", cluster.pk, exc)
