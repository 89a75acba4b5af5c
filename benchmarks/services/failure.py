"""Why a run failed, in plain words: pgbench's (or the panel's) message mapped to what to do.

It reads the texts a run stored (its reason, pgbench's first fatal error, its status) and returns
translated sentences (Django's gettext: that is why it is not in ``lib/``, whose modules import no
Django). The run page shows them first, above the figures, so a person reads the cause
before any number. The original message is kept next to them (``detail``): a mapping can be
wrong, pgbench's own words are not; only the paths it names (the server's socket) are left out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.utils.translation import gettext as _
from django.utils.translation import gettext_noop as N_

from panel.clusters.lib.refusals import without_paths

# What a run's page says when the node could not start the tool; the cause (a path, the system's
# words) is in the log. "Could not run" is what explain_failure reads.
NOT_PREPARED = N_(
    "Could not run %(tool)s: its work directory could not be made on this node. The panel's log "
    "holds the details for an administrator."
)
NOT_STARTED = N_(
    "Could not run %(tool)s on this node. The panel's log holds the details for an administrator."
)


@dataclass(frozen=True)
class Explanation:
    """``title`` says what happened, ``advice`` what to do about it, ``detail`` the original text."""

    title: str
    advice: str
    detail: str


# Pattern on pgbench's message: (title, advice), first match wins. The patterns are libpq's and
# pgbench's own English texts (LC_ALL=C is forced on pgbench); see benchmarks/tests/fixtures/pgbench.
_RULES: dict[str, tuple[str, str]] = {
    r"remaining connection slots are reserved|too many clients already|sorry, too many clients": (
        N_("More clients than the plan allows"),
        N_(
            "The server refused connections beyond its limit. Use a connection pool, or run with fewer clients."
        ),
    ),
    r"database \"[^\"]*\" does not exist": (
        N_("The database does not exist"),
        N_("Create the database, then initialise a data set in it (Benchmarks tab, “Initialise”)."),
    ),
    r"relation \"pgbench_\w+\" does not exist": (
        N_("The database has no pgbench tables"),
        N_("Initialise a data set in this database first (Benchmarks tab, “Initialise”)."),
    ),
    r"relation \"sbtest\d+\" does not exist": (
        N_("The database has no sysbench tables, or fewer than the run asks for"),
        N_("Prepare a sysbench data set in this database first (Benchmarks tab, engine sysbench)."),
    ),
    r"password authentication failed|no password supplied|role \"[^\"]*\" does not exist": (
        N_("The server did not accept the user or its password"),
        N_("Check the user exists and its password in the panel is current (Users tab)."),
    ),
    r"no more connections allowed|max_client_conn|pool_size|query_wait_timeout": (
        N_("The connection pool refused or timed out clients"),
        N_("The pool is too small for this many clients: raise its size or run with fewer clients."),
    ),
    r"connection to server .* failed|Connection refused|could not connect|timeout expired": (
        N_("Could not connect to the server"),
        N_("The cluster or its pool is not accepting connections: check it is online on the Overview."),
    ),
    r"prepared statement \"[^\"]*\" does not exist": (
        N_("Prepared statements do not work through this pool"),
        N_("A transaction pool does not keep prepared statements: use query mode “simple” or “extended”."),
    ),
}


def explain_failure(status: str, reason: str, first_error: str = "") -> Explanation | None:
    """The plain-words explanation of a run that did not succeed; None when it succeeded or is
    still going. ``reason`` is the run's stored reason, ``first_error`` pgbench's first fatal error."""
    if status in ("succeeded", "queued", "running"):
        return None
    # Rows stored before the parser left paths out may still name the server's socket.
    detail = without_paths((first_error or reason or "").strip())
    reason = without_paths(reason)
    if status == "cancelled":
        return Explanation(
            _("Cancelled by a user"),
            _("The run was stopped on request; the samples so far are kept."),
            detail,
        )
    if status == "errored":
        # The traceback names the panel's files and the server's paths: the log's, not the page's.
        return Explanation(
            _("The panel failed while running it"),
            _(
                "This is a bug of the panel, not of your database: the panel's log holds the "
                "traceback for an administrator."
            ),
            "",
        )
    text = f"{first_error}\n{reason}"
    if "worker lost" in reason:
        return Explanation(
            _("The worker running it stopped"),
            _("The background worker died or was restarted during the run. Launch the run again."),
            reason.strip(),
        )
    if "did not finish within" in reason or "exceeded its time limit" in reason:
        return Explanation(
            _("The run took too long and was stopped"),
            _("pgbench ran past its duration plus a margin: the server may be overloaded."),
            reason.strip(),
        )
    for pattern, (title, advice) in _RULES.items():
        if re.search(pattern, text):
            return Explanation(_(title), _(advice), detail)
    if status == "completed_with_errors" or re.search(r"clients? aborted", reason):
        return Explanation(
            _("Some clients aborted"),
            _("pgbench ran, but some clients stopped on an error (below): their transactions are missing."),
            detail,
        )
    if re.search(r"stopped by signal", reason):
        return Explanation(
            _("pgbench was killed"),
            _("pgbench was stopped by a signal before it finished. Launch the run again."),
            detail,
        )
    return Explanation(
        _("The run did not finish"),
        _("pgbench stopped with the error below."),
        detail,
    )


# The kinds of pgbench's error lines (benchmarks.lib.pgbench_output), as a person reads them.
_KIND_LABELS = {
    "connection_failed": N_("connection failed"),
    "no_connection": N_("no connection"),
    "client_aborted": N_("client aborted"),
    "run_aborted": N_("run aborted"),
    "error": N_("error"),
    "transaction_failure": N_("transaction failed"),
    "ignored": N_("ignored by pgbench"),
    "warning": N_("server warning"),
    "detail": N_("detail"),
}


def kind_label(kind: str) -> str:
    """An error line's kind in words (an unknown kind is shown with spaces for underscores)."""
    label = _KIND_LABELS.get(kind)
    return _(label) if label else kind.replace("_", " ")
