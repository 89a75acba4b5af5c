"""Alert rules: validation, evaluation after each collection, events and one email per firing."""

from __future__ import annotations

import datetime as dt
import logging
import math

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import get_connection, send_mail
from django.core.validators import validate_email
from django.db import transaction
from django.utils import translation
from django.utils.functional import Promise
from django.utils.translation import gettext as _

from panel.accounts.services import account_language
from panel.clusters.face import failures, transitions
from panel.clusters.models import Cluster, EventLevel
from panel.core.errors import N_, Message, ServiceError, words
from panel.insights.models import AlertKind, AlertRule, AlertState

log = logging.getLogger(__name__)

MAX_DURATION = 86400
# Alerts are sent from the collection cycle: a mail server that accepts but never answers must not
# hold every cluster's next collection (Django's SMTP backend waits forever without EMAIL_TIMEOUT).
EMAIL_TIMEOUT_SECONDS = 10.0


def _kind_value(kind: str, values: dict[tuple[str, str], float]) -> float | None:
    """The figure a rule of ``kind`` compares, from one collection; None when it was not read."""
    if kind == AlertKind.CPU_PERCENT:
        return values.get(("cpu_percent", ""))
    if kind == AlertKind.CONNECTIONS_PERCENT:
        return values.get(("conn_percent", ""))
    if kind == AlertKind.DISK_PERCENT:
        return values.get(("disk_percent", ""))
    if kind == AlertKind.POOL_WAITING_CLIENTS:
        waiting = [v for (metric, _labels), v in values.items() if metric == "pool_cl_waiting"]
        return max(waiting) if waiting else None
    return None


# --- rules ------------------------------------------------------------------------------------------


def _refused(sentence: str, field: str, code: str, **params: object) -> ServiceError:
    return ServiceError(sentence, field, code=code, params=params)


def _number(value: object, field: str) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise _refused(N_("Enter a number."), field, "alert.number_invalid") from None
    if not math.isfinite(number):  # "nan", "inf", "1e400"
        raise _refused(N_("Enter a number."), field, "alert.number_invalid")
    return number


def save_rule(
    cluster: Cluster,
    kind: str,
    threshold: object,
    duration_seconds: object,
    *,
    enabled: bool = True,
    email: str = "",
) -> AlertRule:
    """Create or replace the cluster's rule of ``kind``; ServiceError names the field at fault."""
    if kind not in AlertKind.values:
        raise _refused(N_("Unknown alert kind."), "kind", "alert.kind_unknown")
    if kind in AlertKind.HOST_ONLY and not cluster.is_local:
        raise _refused(
            N_("CPU and disk figures exist only for clusters provisioned here."),
            "kind",
            "alert.host_metrics_unavailable",
        )
    value = _number(threshold, "threshold")
    if kind in AlertKind.PERCENTS and not 1 <= value <= 100:
        raise _refused(N_("Enter a percentage between 1 and 100."), "threshold", "alert.percent_out_of_range")
    if kind == AlertKind.POOL_WAITING_CLIENTS and (value < 1 or value != int(value)):
        raise _refused(
            N_("Enter a whole number of clients, at least 1."), "threshold", "alert.clients_invalid"
        )
    duration = _number(duration_seconds, "duration_seconds")
    if duration != int(duration) or not 0 <= duration <= MAX_DURATION:
        raise _refused(
            N_("Enter a duration between 0 and %(max)d seconds."),
            "duration_seconds",
            "alert.duration_out_of_range",
            max=MAX_DURATION,
        )
    email = (email or "").strip()
    if email:
        try:
            validate_email(email)
        except ValidationError:
            raise _refused(N_("Enter a valid email address."), "email", "alert.email_invalid") from None
    with transaction.atomic():
        rule, _created = AlertRule.objects.update_or_create(
            cluster=cluster,
            kind=kind,
            defaults={
                "threshold": value,
                "duration_seconds": int(duration),
                "enabled": enabled,
                "email": email,
            },
        )
        # A changed rule starts over: a firing alert under the old threshold says nothing now.
        AlertState.objects.filter(rule=rule).delete()
    return rule


def delete_rule(rule: AlertRule) -> None:
    rule.delete()


def firing_alerts(cluster: Cluster) -> list[AlertRule]:
    """The cluster's enabled rules firing now (the cluster page's banner), state prefetched."""
    return list(
        AlertRule.objects.filter(cluster=cluster, enabled=True, state__firing_since__isnull=False)
        .select_related("state")
        .order_by("state__firing_since")
    )


def state_of(rule: AlertRule) -> AlertState | None:
    """The rule's state (prefetch it with ``select_related("state")``); None before its first evaluation."""
    try:
        return rule.state
    except AlertState.DoesNotExist:
        return None  # never evaluated yet


# --- evaluation -------------------------------------------------------------------------------------


def _describe(rule: AlertRule, value: float) -> Message:
    return Message(
        N_("%(what)s is %(value).1f, at or above %(threshold)g for %(duration)d s."),
        what=AlertKind(rule.kind).label,
        value=value,
        threshold=rule.threshold,
        duration=rule.duration_seconds,
    )


def _notify(cluster: Cluster, rule: AlertRule, value: float) -> bool:
    return notify_owner(cluster, AlertKind(rule.kind).label, _describe(rule, value), to=rule.email)


def notify_owner(
    cluster: Cluster, what: str | Promise | Message, body: str | Message, *, to: str = ""
) -> bool:
    """The alert channel: one email to ``to`` or the cluster owner's address, "[pgpanel]
    <cluster>: <what> alert", in the owner's language (their account's choice, else the panel's
    default); a mail server that fails is an error event, never an exception."""
    recipient = to or cluster.owner.email
    if not recipient:
        return False
    with translation.override(account_language(cluster.owner) or settings.LANGUAGE_CODE):
        subject = _("[pgpanel] %(cluster)s: %(what)s alert") % {"cluster": cluster.name, "what": words(what)}
        body = words(body)
    try:
        timeout = settings.EMAIL_TIMEOUT or EMAIL_TIMEOUT_SECONDS
        send_mail(
            subject,
            body,
            settings.DEFAULT_FROM_EMAIL,
            [recipient],
            connection=get_connection(timeout=timeout),
        )
    except Exception as exc:  # an unreachable mail server must not stop the collection
        log.warning("insights: alert email for %s failed: %s", cluster.pk, exc)
        # The mail server's or the system's words (English, its host and reply): the log's.
        transitions.log_event(
            cluster,
            "alert-email",
            Message(N_("Could not send the alert email: %(r)s"), r=failures.reason(exc)),
            EventLevel.ERROR,
        )
        return False
    return True


def notify_role_change(cluster: Cluster, message: str | Message) -> bool:
    """A failover or switchover of a cluster with standbys, told to its owner."""
    return notify_owner(cluster, Message(N_("Primary changed")), message)


def notify_replica_resynced(cluster: Cluster, message: str | Message) -> bool:
    """A read-only replica healed after its source's failover (pg_rewind or a new copy), told to
    its owner once, when it streams again (failed attempts are events on its page)."""
    return notify_owner(cluster, Message(N_("Replica re-synced")), message)


def evaluate_alerts(cluster: Cluster, values: dict[tuple[str, str], float], now: dt.datetime) -> list[str]:
    """Advance every enabled rule of the cluster with one collection's values; returns transitions.

    A missing figure (the source did not answer) leaves a rule where it was: no data neither
    fires nor resolves an alert.
    """
    changes = []
    # Every collection of every cluster passes here: the states come with the rules.
    for rule in AlertRule.objects.filter(cluster=cluster, enabled=True).select_related("state"):
        value = _kind_value(rule.kind, values)
        if value is None:
            continue
        state = state_of(rule) or AlertState(rule=rule)
        state.last_value = value
        state.evaluated_at = now
        if value >= rule.threshold:
            if state.pending_since is None:
                state.pending_since = now
            held = (now - state.pending_since).total_seconds()
            if state.firing_since is None and held >= rule.duration_seconds:
                state.firing_since = now
                transitions.log_event(cluster, "alert-firing", _describe(rule, value), EventLevel.WARNING)
                if _notify(cluster, rule, value):
                    state.last_notified_at = now
                changes.append(f"{rule.kind} firing")
        else:
            state.pending_since = None
            if state.firing_since is not None:
                state.firing_since = None
                transitions.log_event(
                    cluster,
                    "alert-resolved",
                    Message(
                        N_("%(what)s is back to %(value).1f, under %(threshold)g."),
                        what=AlertKind(rule.kind).label,
                        value=value,
                        threshold=rule.threshold,
                    ),
                )
                changes.append(f"{rule.kind} resolved")
        state.save()
    return changes
