"""What a page, an event and the command line say when a long job on a cluster fails: a coded
sentence naming what failed and what to do. The engine's own words (a program's output such as
make's or apt-get's advice, the server's text, with its paths) are the server log's only: they
are in English, name files a tenant has no business seeing, and say nothing the tenant can act on.

Every function here logs the raw reason, then returns the Message to keep (``message_to_text``)
and to put in the events.
"""

from __future__ import annotations

import logging

from panel.clusters.engine import guard
from panel.core.errors import N_, CodedError, Message, Term

log = logging.getLogger(__name__)


def _raw(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _worded(exc: BaseException) -> Message | None:
    """A refusal the service worded itself (a template from the catalogue, not a program's text)."""
    words = exc.as_message() if isinstance(exc, CodedError) else getattr(exc, "words", None)
    return words if isinstance(words, Message) else None


def provisioning(cluster_id: object, version: str, step: str, exc: BaseException) -> Message:
    """A failed creation: a refusal the service worded itself as it is, the guard's missing
    build tools as such, anything else by the step it stopped at (``step``: its msgid)."""
    log.warning("provisioning %s failed at %r: %s", cluster_id, step, _raw(exc))
    worded = _worded(exc)
    if worded is not None:
        return worded
    if isinstance(exc, guard.GuardBuildError) and exc.tools_missing:
        return Message(
            N_(
                "The privilege guard for PostgreSQL %(version)s cannot be built on this node: its "
                "build tools are missing. An administrator finds in the panel's log what to install; "
                "then retry."
            ),
            "cluster.guard_tools_missing",
            version=version,
        )
    if step:
        return Message(
            N_(
                "Creating the cluster stopped at the step “%(step)s”. Retry; if it fails again, the "
                "panel's log holds the details for an administrator."
            ),
            "cluster.provision_failed",
            step=Term(step),
        )
    return Message(
        N_(
            "Creating the cluster failed. Retry; if it fails again, the panel's log holds the "
            "details for an administrator."
        ),
        "cluster.provision_failed",
    )


def replica(replica_id: object, name: str, exc: BaseException) -> Message:
    """A read-only replica that could not be made (it is gone: the event is on its source)."""
    log.warning("building replica %s failed: %s", replica_id, _raw(exc))
    return Message(
        N_(
            "Read-only replica “%(name)s” could not be made. Try again; if it fails again, the "
            "panel's log holds the details for an administrator."
        ),
        "replica.build_failed",
        name=name,
    )


def deletion(cluster_id: object, exc: BaseException) -> Message:
    """A delete that left something behind: the cluster stays, in error, and can be deleted again."""
    log.warning("deleting cluster %s failed: %s", cluster_id, _raw(exc))
    return Message(
        N_(
            "Could not delete the cluster. Delete it again; if that fails too, the panel's log "
            "holds the details for an administrator."
        ),
        "cluster.delete_failed",
    )


def reason(exc: BaseException) -> Message:
    """The part of a sentence that says why (``… failed: %(reason)s``): a refusal the service
    worded itself, or the pointer to the log (where the caller has logged the engine's words)."""
    return _worded(exc) or Message(
        N_("the panel's log holds the details for an administrator"), "engine.failed"
    )
