"""The kind of a server's or libpq's refusal, and a program's text without its paths (pure): the
texts are PostgreSQL 15's and libpq's as the tests of the services met them."""

from __future__ import annotations

import pytest

from panel.clusters.lib import refusals


@pytest.mark.parametrize(
    ("sqlstate", "text", "kind"),
    [
        ("42710", 'role "x" already exists', refusals.DUPLICATE),
        ("42P04", 'database "x" already exists', refusals.DUPLICATE),
        ("55006", 'database "x" is being accessed by other users', refusals.IN_USE),
        ("2BP01", 'role "x" cannot be dropped because some objects depend on it', refusals.DEPENDENTS),
        ("42704", 'role "x" does not exist', refusals.MISSING),
        ("42501", "permission denied to create role", refusals.PRIVILEGE),
        (None, 'connection is bad: connection to server on socket "/r/.s.PGSQL.1" failed: No such file or directory',
         refusals.REFUSED),
        (None, 'connection to server at "127.0.0.1", port 1 failed: Connection refused', refusals.REFUSED),
        (None, "sorry, too many clients already", refusals.TOO_MANY_CLIENTS),
        (None, 'password authentication failed for user "doadmin"', refusals.AUTHENTICATION),
        (None, 'pg_hba.conf rejects connection for host "127.0.0.1", user "u", database "d", no encryption',
         refusals.AUTHENTICATION),
        (None, 'database "nosuchdb" does not exist', refusals.NO_DATABASE),
        (None, "the database system is starting up", refusals.STARTING),
        (None, "timeout expired", refusals.TIMEOUT),
        (None, "something else entirely", refusals.OTHER),
    ],
)  # fmt: skip
def test_the_kind_of_a_refusal(sqlstate: str | None, text: str, kind: str) -> None:
    assert refusals.kind(sqlstate, text) == kind


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (
            'connection to server on socket "/tmp/pgbench-run-x/.s.PGSQL.26900" failed: FATAL:  sorry, too many clients',
            "connection to server on the server's socket failed: FATAL:  sorry, too many clients",
        ),
        (
            'could not open file "/var/lib/pgpanel/c1/pgdata/base/1/2": Permission denied',
            "could not open file …: Permission denied",
        ),
        ("No such file or directory: '/srv/x/txlog.1'", "No such file or directory: …"),
        ("cannot read /etc/ssl/certs/ca.crt now", "cannot read … now"),
        # What is not a path stays: a relative script name, TCP/IP, a URL, a ratio.
        ('bad.sql:2: syntax error in command "set"', 'bad.sql:2: syntax error in command "set"'),
        ("accepting TCP/IP connections", "accepting TCP/IP connections"),
        ("see https://www.postgresql.org/docs/15/x.html", "see https://www.postgresql.org/docs/15/x.html"),
        ("3 of 4/5 clients", "3 of 4/5 clients"),
    ],
)
def test_a_programs_text_without_its_paths(text: str, shown: str) -> None:
    assert refusals.without_paths(text) == shown
