"""PostgreSQL's jsonlog read as structured records, on a real file (fixtures/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

from panel.logs.lib import jsonlog, logfile
from panel.logs.lib.logfile import Chunk, LogEntry

FIXTURE = Path(__file__).parent / "fixtures" / "postgresql_real.json"
PANEL_ROLES = ("pgpanel", "pgpanel_monitor")
FORGED_DB = "x\\n2026-01-01 00:00:00.000 UTC [1] doadmin@y"


def entries() -> list[LogEntry]:
    return jsonlog.parse([Chunk(FIXTURE.name, 0, FIXTURE.read_bytes())])


def test_every_record_is_one_entry_with_its_fields() -> None:
    found = entries()
    assert len(found) == len(FIXTURE.read_text().splitlines())
    error = next(entry for entry in found if entry.message == "division by zero")
    assert (error.user, error.database, error.level, error.sqlstate) == (
        "doadmin",
        "defaultdb",
        "ERROR",
        "22012",
    )
    assert error.backend_type == "client backend"
    assert error.levels == ["ERROR", "STATEMENT"] and error.details[-1] == "STATEMENT:  SELECT 1/0"
    assert FIXTURE.read_bytes()[error.offset :].startswith(b'{"timestamp"')
    background = found[0]
    assert (background.user, background.database, background.backend_type) == ("", "", "postmaster")
    assert background.lines[0].startswith(
        f"{background.timestamp} [{background.pid}] LOG:  starting PostgreSQL"
    )


def test_detail_hint_context_and_lines_of_a_statement_follow_their_message() -> None:
    found = entries()
    duplicate = next(entry for entry in found if "duplicate key" in entry.message)
    assert duplicate.levels == ["ERROR", "DETAIL", "STATEMENT"]
    hint = next(entry for entry in found if "nosuchfunc" in entry.message)
    assert hint.levels == ["ERROR", "HINT", "STATEMENT"]
    multi = next(entry for entry in found if "invalid input syntax" in entry.message)
    assert multi.details == ["STATEMENT:  SELECT 1", "\t  + 'x'::int", "\t  AS multi_line"]
    nested = next(entry for entry in found if "CONTEXT" in entry.levels)
    assert nested.details[0] == 'CONTEXT:  SQL statement "SELECT 1/0"'


def test_a_forged_prefix_in_a_database_name_stays_in_its_own_entry_and_the_panel_is_hidden() -> None:
    found = entries()
    forged = [entry for entry in found if entry.database == FORGED_DB]
    assert [entry.user for entry in forged] == ["pgpanel_monitor"]
    # Every line of the entry starts with its own escaped prefix: none reads as doadmin's.
    assert all("\n" not in line for line in forged[0].lines)
    shown = logfile.shown(entries(), PANEL_ROLES)
    assert not any(
        "monitor_in_forged_db" in entry.text or "panel_only_marker" in entry.text for entry in shown
    )
    assert any(entry.message == "division by zero" for entry in shown)


def test_redaction_search_and_levels_work_on_records() -> None:
    record = {
        "timestamp": "2026-11-27 16:27:09.445 UTC",
        "user": "doadmin",
        "dbname": "defaultdb",
        "pid": 7,
        "error_severity": "ERROR",
        "message": 'syntax error at or near "x"',
        "statement": "ALTER ROLE doadmin PASSWORD 'tenant-own-secret' x",
    }
    line = (json.dumps(record) + "\n").encode()
    shown = logfile.shown(jsonlog.parse([Chunk("x.json", 0, line)]), PANEL_ROLES)
    assert shown[0].details == ["STATEMENT:  ALTER ROLE doadmin PASSWORD '[redacted]' x"]
    found, more = logfile.newest(entries(), 50, roles=PANEL_ROLES, level="HINT")
    assert [entry.levels for entry in found] == [["ERROR", "HINT", "STATEMENT"]] and not more
    found, _more = logfile.newest(entries(), 50, roles=PANEL_ROLES, search="tenant-own-secret")
    assert found == []


def test_lines_that_are_no_record_are_left_out() -> None:
    data = b'cut-off":"half a record"}\n{"not": "a log record"}\n[1, 2]\n'
    assert jsonlog.parse([Chunk("x.json", 0, data)]) == []
    assert jsonlog.escaped("a\nb\x1b") == "a\\nb\\x1b"
