"""The log parser, hiding, redaction, filters and the capped reader, on real log files captured
here (fixtures/README.md) and on files written by the tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from panel.logs.lib import logfile
from panel.logs.lib.logfile import Chunk, LogEntry, Position

FIXTURES = Path(__file__).parent / "fixtures"
PANEL_ROLES = ("pgpanel", "pgpanel_monitor")


def real(name: str) -> Chunk:
    return Chunk(name, 0, (FIXTURES / name).read_bytes())


def postgres_entries() -> list[LogEntry]:
    return logfile.parse([real("postgresql_real.log")], logfile.POSTGRES)


def by_message(entries: list[LogEntry], text: str) -> LogEntry:
    found = [entry for entry in entries if text in entry.message]
    assert len(found) == 1, [entry.message for entry in found]
    return found[0]


# --- PostgreSQL ---------------------------------------------------------------------------------


def test_an_error_and_its_statement_are_one_entry() -> None:
    entry = postgres_entries()[[e.message for e in postgres_entries()].index("division by zero")]
    assert (entry.timestamp, entry.pid, entry.level) == ("2026-11-25 18:23:46.993 UTC", "23631", "ERROR")
    assert (entry.user, entry.database) == ("doadmin", "defaultdb")
    assert entry.levels == ["ERROR", "STATEMENT"]
    assert entry.details == ["STATEMENT:  SELECT 1/0"]
    assert entry.file == "postgresql_real.log"
    raw = (FIXTURES / "postgresql_real.log").read_bytes()
    assert raw[entry.offset :].startswith(
        b"2026-11-25 18:23:46.993 UTC [23631] doadmin@defaultdb ERROR:  division"
    )


def test_continuation_lines_detail_hint_and_context_join_their_message() -> None:
    entries = postgres_entries()
    multi = by_message(entries, 'invalid input syntax for type integer: "x"')
    assert multi.details == ["STATEMENT:  SELECT 1", "\t  + 'x'::int", "\t  AS multi_line"]
    duplicate = by_message(entries, "duplicate key value")
    assert duplicate.levels == ["ERROR", "DETAIL", "STATEMENT"]
    hint = by_message(entries, "nosuchfunc(integer) does not exist")
    assert hint.levels == ["ERROR", "HINT", "STATEMENT"]
    nested = [e for e in entries if e.message == "division by zero" and "CONTEXT" in e.levels]
    assert nested[0].details[:2] == [
        'CONTEXT:  SQL statement "SELECT 1/0"',
        "\tPL/pgSQL function inline_code_block line 1 at PERFORM",
    ]
    warning = by_message(entries, "careful: 42")
    assert warning.level == "WARNING" and warning.levels == ["WARNING", "CONTEXT"]
    fatal = by_message(entries, "password authentication failed")
    assert fatal.level == "FATAL" and fatal.levels == ["FATAL", "DETAIL"]


def test_background_lines_have_no_user_and_every_line_is_an_entry_or_part_of_one() -> None:
    entries = postgres_entries()
    start = entries[0]
    assert start.level == "LOG" and start.user == "" and start.database == "" and start.pid == "23426"
    assert start.message.startswith("starting PostgreSQL 15")
    lines = (FIXTURES / "postgresql_real.log").read_text().splitlines()
    assert sum(len(entry.lines) for entry in entries) == len(lines)


def test_a_detail_of_another_process_does_not_join() -> None:
    text = (
        b"2026-01-01 00:00:00.000 UTC [1] a@b ERROR:  one\n"
        b"2026-01-01 00:00:00.001 UTC [2] c@d DETAIL:  of another process\n"
    )
    entries = logfile.parse([Chunk("f", 0, text)], logfile.POSTGRES)
    assert [entry.levels for entry in entries] == [["ERROR"], ["DETAIL"]]


def test_lines_cut_at_the_start_of_a_read_are_dropped() -> None:
    text = b"\tcontinued secret line\ngarbage without a prefix\n2026-01-01 00:00:00.000 UTC [1] LOG:  first\n"
    entries = logfile.parse([Chunk("f", 100, text)], logfile.POSTGRES)
    assert [entry.message for entry in entries] == ["first"]
    assert entries[0].offset == 100 + text.index(b"2026")


# --- PgBouncer ----------------------------------------------------------------------------------


def test_pgbouncer_lines_with_their_client_database_and_user() -> None:
    entries = logfile.parse([real("pgbouncer_real.log")], logfile.PGBOUNCER)
    assert len(entries) == len((FIXTURES / "pgbouncer_real.log").read_text().splitlines())
    login = by_message(entries, "cap-pool/doadmin@127.0.0.1:34214 login attempt")
    assert (login.level, login.user, login.database, login.pid) == ("LOG", "doadmin", "cap-pool", "23696")
    warning = by_message(entries, "pooler error: no such database")
    assert (warning.level, warning.user, warning.database) == ("WARNING", "doadmin", "(nodb)")
    up = by_message(entries, "process up: PgBouncer 1.18.0")
    assert up.user == "" and up.level == "LOG"


def test_the_older_pgbouncer_fixture_parses_errors_too() -> None:
    text = (Path(__file__).parents[2] / "pools/tests/fixtures/pgbouncer_log_excerpt_events.txt").read_bytes()
    entries = logfile.parse([Chunk("pgbouncer.log", 0, text)], logfile.PGBOUNCER)
    assert {"LOG", "ERROR", "WARNING"} <= {entry.level for entry in entries}


# --- what a tenant sees -------------------------------------------------------------------------


def test_the_panels_sessions_are_hidden_the_tenants_are_not() -> None:
    entries = logfile.shown(postgres_entries(), PANEL_ROLES)
    assert entries
    assert not any("pgpanel@" in line for entry in entries for line in entry.lines)
    assert any(entry.user == "doadmin" for entry in entries)
    bouncer = logfile.shown(logfile.parse([real("pgbouncer_real.log")], logfile.PGBOUNCER), ("pgbouncer",))
    assert not any("pgbouncer/pgbouncer@" in entry.text for entry in bouncer)
    assert any("cap-pool/doadmin" in entry.text for entry in bouncer)


def test_an_entry_with_any_line_of_a_panel_role_is_hidden() -> None:
    text = (
        b"2026-01-01 00:00:00.000 UTC [7] doadmin@x ERROR:  one\n"
        b"2026-01-01 00:00:00.000 UTC [7] pgpanel@postgres STATEMENT:  ALTER ROLE a PASSWORD 'p'\n"
    )
    entries = logfile.parse([Chunk("f", 0, text)], logfile.POSTGRES)
    assert len(entries) == 1 and logfile.shown(entries, PANEL_ROLES) == []


def test_a_line_break_in_a_database_name_does_not_join_a_panel_line_to_the_tenants() -> None:
    text = (
        b'2026-01-01 00:00:00.000 UTC [6] doadmin@x LOG:  statement: CREATE DATABASE "a\nb"\n'
        b"2026-01-01 00:00:01.000 UTC [7] pgpanel_monitor@a\n"
        b"b LOG:  duration: 1.0 ms  statement: SELECT pg_catalog.pg_database_size('a\nb')\n"
    )
    entries = logfile.parse([Chunk("f", 0, text)], logfile.POSTGRES)
    assert [entry.user for entry in entries] == ["doadmin", "pgpanel_monitor"]
    shown = logfile.shown(entries, PANEL_ROLES)
    assert len(shown) == 1 and "pg_database_size" not in shown[0].text


def test_a_role_named_like_a_panel_role_with_more_is_not_the_panel() -> None:
    text = b"2026-01-01 00:00:00.000 UTC [7] pgpanel_x@db LOG:  mine\n"
    entries = logfile.parse([Chunk("f", 0, text)], logfile.POSTGRES)
    assert [entry.user for entry in logfile.shown(entries, PANEL_ROLES)] == ["pgpanel_x"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "CREATE ROLE capx LOGIN PASSWORD 'x-secret-literal'",
            "CREATE ROLE capx LOGIN PASSWORD '[redacted]'",
        ),
        ("alter role a with encrypted password 'it''s'", "alter role a with encrypted password '[redacted]'"),
        ("ALTER ROLE a PASSWORD E'esc\\'aped'", "ALTER ROLE a PASSWORD '[redacted]'"),
        (
            "ALTER ROLE a PASSWORD $q$dollar 'quoted'$q$ VALID UNTIL 'x'",
            "ALTER ROLE a PASSWORD '[redacted]' VALID UNTIL 'x'",
        ),
        ("ALTER ROLE a PASSWORD 'first line\n\tsecond line'", "ALTER ROLE a PASSWORD '[redacted]'"),
        ("ALTER ROLE a PASSWORD 'cut at the end", "ALTER ROLE a PASSWORD '[redacted]'"),
        ("ALTER ROLE a PASSWORD NULL", "ALTER ROLE a PASSWORD NULL"),
        (
            "SELECT dblink('host=x password=hunter2 dbname=y')",
            "SELECT dblink('host=x password=[redacted] dbname=y')",
        ),
        ("verifier SCRAM-SHA-256$4096:abc==$def=:ghi= here", "verifier [redacted] here"),
        ("md5 md5" + "0123456789abcdef" * 2 + " end", "md5 [redacted] end"),
        ("no secret here: passwords are good", "no secret here: passwords are good"),
    ],
)
def test_password_literals_and_stored_secrets_are_redacted(text: str, expected: str) -> None:
    assert logfile.redact(text) == expected


def test_known_secrets_are_redacted_anywhere_and_short_ones_left() -> None:
    assert logfile.redact("SELECT 'Zq7xK2secret' || 'abc'", ["Zq7xK2secret", "abc", ""]) == (
        "SELECT '[redacted]' || 'abc'"
    )


def test_the_servers_directories_are_shortened() -> None:
    root = "/tmp/pgpanel-test-o1_lt_dw/clusters/99ff9b352b9f474bbcce4832cdca0e3c"
    entries = logfile.shown(postgres_entries(), PANEL_ROLES, paths=[root, "/tmp/pgpanel-test-o1_lt_dw", "/"])
    socket = by_message(entries, "listening on Unix socket")
    assert socket.message == 'listening on Unix socket "…/run/.s.PGSQL.26010"'
    assert not any("pgpanel-test" in entry.text for entry in entries)


def test_a_search_runs_on_redacted_text() -> None:
    entries = logfile.shown(postgres_entries(), PANEL_ROLES, ["x-secret-literal"])
    assert not [entry for entry in entries if logfile.matches(entry, search="x-secret")]
    assert [entry for entry in entries if logfile.matches(entry, search="CREATE ROLE capx")]


def test_level_and_search_filters() -> None:
    entries = logfile.shown(postgres_entries(), PANEL_ROLES)
    errors = [entry for entry in entries if logfile.matches(entry, level="ERROR")]
    assert len(errors) == 5 and all("ERROR" in entry.levels for entry in errors)
    statements = [entry for entry in entries if logfile.matches(entry, level="statement")]
    assert all("STATEMENT" in entry.levels for entry in statements) and len(statements) == 5
    found = [entry for entry in entries if logfile.matches(entry, level="ERROR", search="DIVISION BY")]
    assert len(found) == 2
    assert [entry.level for entry in entries if logfile.matches(entry, level="FATAL")] == ["FATAL"]


def test_newest_gives_the_newest_matches_first_and_says_when_more_matched() -> None:
    entries = postgres_entries()
    found, more = logfile.newest(entries, 2, roles=PANEL_ROLES, level="ERROR", secrets=["x-secret-literal"])
    assert more and [entry.message for entry in found] == [
        "division by zero",
        "function nosuchfunc(integer) does not exist at character 8",
    ]
    everything, more = logfile.newest(postgres_entries(), 10_000, roles=PANEL_ROLES, search="capx")
    assert not more and len(everything) == 1 and "[redacted]" in everything[0].text
    shown = logfile.shown(postgres_entries(), PANEL_ROLES)
    assert [e.offset for e in logfile.newest(postgres_entries(), 10_000, roles=PANEL_ROLES)[0]] == [
        e.offset for e in reversed(shown)
    ]
    # The search sees the redacted text only.
    assert logfile.newest(postgres_entries(), 10, roles=PANEL_ROLES, search="x-secret") == ([], False)


# --- reading within a cap -----------------------------------------------------------------------


def line(n: int, pid: int = 1) -> bytes:
    return f"2026-01-01 00:00:{n % 60:02d}.000 UTC [{pid}] u@d LOG:  entry {n:05d}\n".encode()


def test_a_small_file_is_read_whole_and_the_cursor_is_its_end(tmp_path: Path) -> None:
    path = tmp_path / "postgresql.log"
    path.write_bytes(b"".join(line(n) for n in range(10)))
    read = logfile.read_tail(path, 1 << 20)
    assert not read.older_not_read and read.files == ("postgresql.log",)
    assert read.end == Position(os.stat(path).st_ino, path.stat().st_size)
    assert len(logfile.parse(read.chunks, logfile.POSTGRES)) == 10


def test_a_big_file_is_read_from_its_end_within_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "postgresql.log"
    path.write_bytes(b"".join(line(n) for n in range(10_000)))
    cap = 20_000
    read = logfile.read_tail(path, cap)
    assert read.older_not_read and read.bytes_read <= cap
    entries = logfile.parse(read.chunks, logfile.POSTGRES)
    assert entries[-1].message == "entry 09999"
    # The first line read is whole (a line cut by the cap is left out).
    assert entries[0].lines[0].startswith("2026-01-01")
    assert len(entries) == read.bytes_read // len(line(0))


def test_a_line_being_written_waits_for_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "postgresql.log"
    path.write_bytes(line(1) + b"2026-01-01 00:00:02.000 UTC [1] u@d LOG:  half")
    read = logfile.read_tail(path, 1 << 20)
    assert [e.message for e in logfile.parse(read.chunks, logfile.POSTGRES)] == ["entry 00001"]
    with open(path, "ab") as fh:
        fh.write(b" written\n")
    tail = logfile.read_tail(path, 1 << 20, read.end)
    assert [e.message for e in logfile.parse(tail.chunks, logfile.POSTGRES)] == ["half written"]


def test_the_tail_returns_only_what_came_after_the_cursor(tmp_path: Path) -> None:
    path = tmp_path / "postgresql.log"
    path.write_bytes(b"".join(line(n) for n in range(5)))
    first = logfile.read_tail(path, 1 << 20)
    assert first.end is not None
    nothing = logfile.read_tail(path, 1 << 20, Position.parse(str(first.end)))
    assert logfile.parse(nothing.chunks, logfile.POSTGRES) == [] and nothing.end == first.end
    with open(path, "ab") as fh:
        fh.write(line(5) + line(6))
    tail = logfile.read_tail(path, 1 << 20, first.end)
    assert [e.message for e in logfile.parse(tail.chunks, logfile.POSTGRES)] == ["entry 00005", "entry 00006"]
    # Much more than the cap since the cursor: the newest part only, and it says so.
    with open(path, "ab") as fh:
        fh.write(b"".join(line(n) for n in range(7, 2000)))
    burst = logfile.read_tail(path, 5_000, tail.end)
    assert burst.older_not_read and burst.bytes_read <= 5_000
    assert logfile.parse(burst.chunks, logfile.POSTGRES)[-1].message == "entry 01999"


def test_a_rotated_or_truncated_file_is_read_again_from_its_end(tmp_path: Path) -> None:
    path = tmp_path / "postgresql.log"
    path.write_bytes(b"".join(line(n) for n in range(50)))
    before = logfile.read_tail(path, 1 << 20).end
    assert before is not None
    path.write_bytes(line(99))  # truncated in place: same inode, shorter
    read = logfile.read_tail(path, 1 << 20, before)
    assert [e.message for e in logfile.parse(read.chunks, logfile.POSTGRES)] == ["entry 00099"]
    after_truncation = read.end
    path.rename(tmp_path / "postgresql.log.1")  # rotated: a new file with another inode
    path.write_bytes(line(100) + line(101))
    read = logfile.read_tail(path, 1 << 20, after_truncation)
    # The new file only, all of it: nothing shown before comes again.
    assert [e.message for e in logfile.parse(read.chunks, logfile.POSTGRES)] == ["entry 00100", "entry 00101"]


def test_a_log_that_did_not_exist_is_tailed_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "pgbouncer.log"
    assert logfile.read_tail(path, 1000).end is None
    path.write_bytes(line(1) + line(2))
    read = logfile.read_tail(path, 1 << 20, Position.parse(logfile.NOTHING_READ))
    assert [e.message for e in logfile.parse(read.chunks, logfile.POSTGRES)] == ["entry 00001", "entry 00002"]
    again = logfile.read_tail(path, 1 << 20, read.end)
    assert again.chunks[0].data == b""


def test_rotated_files_are_read_oldest_first_while_the_cap_allows(tmp_path: Path) -> None:
    path = tmp_path / "postgresql.log"
    (tmp_path / "postgresql.log.2").write_bytes(b"".join(line(n) for n in range(100)))
    (tmp_path / "postgresql.log.1").write_bytes(b"".join(line(n) for n in range(100, 200)))
    (tmp_path / "postgresql.log.old").write_bytes(b"not a rotation of ours\n")
    path.write_bytes(b"".join(line(n) for n in range(200, 210)))
    read = logfile.read_tail(path, 1 << 20)
    assert read.files == ("postgresql.log", "postgresql.log.1", "postgresql.log.2")
    messages = [e.message for e in logfile.parse(read.chunks, logfile.POSTGRES)]
    assert messages == [f"entry {n:05d}" for n in range(210)] and not read.older_not_read
    entries = logfile.parse(read.chunks, logfile.POSTGRES)
    assert {e.file for e in entries} == set(read.files)
    # A cap that reaches into the first rotated file only: the oldest is not read, and it says so.
    small = logfile.read_tail(path, len(line(0)) * 60)
    messages = [e.message for e in logfile.parse(small.chunks, logfile.POSTGRES)]
    assert small.older_not_read and messages[-1] == "entry 00209" and "entry 00099" not in messages


def test_no_file_yet_reads_nothing(tmp_path: Path) -> None:
    read = logfile.read_tail(tmp_path / "postgresql.log", 1000)
    assert read.chunks == () and read.end is None and not read.older_not_read


@pytest.mark.parametrize("text", ["", "x", "1:", ":2", "a:b", "1:2:3"])
def test_a_bad_cursor_is_no_cursor(text: str) -> None:
    assert Position.parse(text) is None
