"""What a page, an event and the command line say when a long job on a cluster fails: a coded
sentence naming what failed and what to do. The engine's own words (a program's output such as
make's or apt-get's advice, the server's text, with its paths) are the server log's only: they
are in English, name files a tenant has no business seeing, and say nothing the tenant can act on.

Every function here logs the raw reason, then returns the Message to keep (``message_to_text``)
and to put in the events; ``refused_change`` (a server's refusal of a change to the user's own
database or user) and ``connecting`` (a connection to a server the user named) choose theirs by
the kind of refusal (``lib/refusals.py``: the SQLSTATE, or libpq's text), with the user's own names.
"""

from __future__ import annotations

import logging

from panel.clusters.engine import guard
from panel.clusters.lib import refusals
from panel.core.errors import N_, CodedError, Message, ServiceError, Term

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


# --- a server's refusal of a change to a user's own object ----------------------------------------

DATABASE, NEW_DATABASE, USER = "database", "new_database", "user"

_DATABASE_GONE = (
    N_("The server has no database named “%(name)s” any more (it was removed outside the panel)."),
    "cluster.server_object_missing",
)
# (what was changed, kind) → (sentence, code); a kind not listed for the object reads ``_ANY``.
_ON_OBJECT: dict[tuple[str, str], tuple[str, str]] = {
    (NEW_DATABASE, refusals.DUPLICATE): (
        N_(
            "The server already has a database named “%(name)s” (made outside the panel). Choose another name."
        ),
        "database.name_taken",
    ),
    (USER, refusals.DUPLICATE): (
        N_(
            "The server already has a user or role named “%(name)s” (made outside the panel). Choose "
            "another name."
        ),
        "user.name_taken",
    ),
    (NEW_DATABASE, refusals.IN_USE): (
        N_(
            "The database “%(name)s” could not be made while another session uses the server's template "
            "database. Try again in a moment."
        ),
        "cluster.server_object_in_use",
    ),
    (DATABASE, refusals.IN_USE): (
        N_(
            "The database “%(name)s” is in use by other sessions: close their connections (a pool's "
            "too), then try again."
        ),
        "cluster.server_object_in_use",
    ),
    (USER, refusals.DEPENDENTS): (
        N_(
            "The user “%(name)s” still owns objects or holds privileges on them: give them to another "
            "user or drop them (REASSIGN OWNED, DROP OWNED), then delete the user."
        ),
        "cluster.server_dependents",
    ),
    (DATABASE, refusals.MISSING): _DATABASE_GONE,
    (DATABASE, refusals.NO_DATABASE): _DATABASE_GONE,
    (USER, refusals.MISSING): (
        N_("The server has no user named “%(name)s” any more (it was removed outside the panel)."),
        "cluster.server_object_missing",
    ),
}
_ANY: dict[str, tuple[str, str]] = {
    refusals.PRIVILEGE: (
        N_(
            "The server does not let the panel's login change “%(name)s”. On an attached server, give "
            "that login the privileges it needs (CREATEROLE, CREATEDB) where the server runs."
        ),
        "cluster.server_privilege",
    ),
    refusals.INVALID_NAME: (
        N_("The server does not accept “%(name)s” as a name; choose another."),
        "cluster.server_name_invalid",
    ),
    refusals.IN_USE: (
        N_("“%(name)s” is in use by another session; try again once it has finished."),
        "cluster.server_object_in_use",
    ),
    refusals.TOO_MANY_CLIENTS: (
        N_("The server has no free connection for the panel; try again once some clients have disconnected."),
        "cluster.server_busy",
    ),
    refusals.STARTING: (
        N_("The server is starting up or shutting down; try again in a moment."),
        "cluster.server_starting",
    ),
    refusals.TIMEOUT: (
        N_(
            "The server did not finish changing “%(name)s” in time (another session may hold a lock); try again."
        ),
        "cluster.server_timeout",
    ),
}
_OTHER = (
    N_("The server refused the change to “%(name)s”. The panel's log holds its words for an administrator."),
    "cluster.server_refused",
)


def refused_change(
    cluster_id: object, exc: BaseException, *, what: str, name: str, field: str | None = None
) -> ServiceError:
    """The server refused a change of the user's own ``what`` (``DATABASE``, ``NEW_DATABASE``,
    ``USER``) named ``name``: a sentence chosen by the SQLSTATE, about ``field``; its words logged."""
    log.warning("the server of %s refused a change of %s %r: %s", cluster_id, what, name, _raw(exc))
    found = refusals.kind(getattr(exc, "sqlstate", None), str(exc))
    template, code = _ON_OBJECT.get((what, found)) or _ANY.get(found) or _OTHER
    return ServiceError(template, field=field, code=code, params={"name": name})


# --- a connection to a server the user named (attaching one) --------------------------------------

_CONNECTING: dict[str, str] = {
    refusals.REFUSED: N_(
        "nothing accepts connections there; check the host, the port and that the server listens on TCP"
    ),
    refusals.UNKNOWN_HOST: N_("the host name cannot be resolved"),
    refusals.TIMEOUT: N_("it did not answer in time (a firewall may drop the connection)"),
    refusals.AUTHENTICATION: N_(
        "the server does not accept the user “%(user)s” with this password from the panel's address"
    ),
    refusals.NO_DATABASE: N_("the server has no database named “%(database)s”"),
    refusals.TLS: N_(
        "the TLS connection failed with SSL mode “%(sslmode)s”; check the mode the server supports"
    ),
    refusals.TOO_MANY_CLIENTS: N_("the server has no free connection slot; try again later"),
    refusals.STARTING: N_("the server is starting up or shutting down; try again in a moment"),
    refusals.CLOSED: N_("the server closed the connection"),
}


def connecting(exc: BaseException, **params: object) -> Message:
    """Why a connection to a server the user named failed, as the part of a sentence that says
    why: chosen by the kind of refusal, with the user's own ``user``, ``database`` and ``sslmode``;
    the caller logs the words."""
    found = refusals.kind(getattr(exc, "sqlstate", None), str(exc))
    if found == refusals.AUTHENTICATION and "pg_hba.conf" in str(exc):
        return Message(
            N_(
                "the server accepts no login of “%(user)s” to “%(database)s” from the panel's address "
                "with SSL mode “%(sslmode)s” (no line of its pg_hba.conf allows it)"
            ),
            "attach.not_allowed",
            **params,
        )
    template = _CONNECTING.get(found)
    if template is None:
        return Message(N_("the panel's log holds the server's words for an administrator"), "attach.other")
    return Message(template, f"attach.{found}", **params)
