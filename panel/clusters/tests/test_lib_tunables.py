"""The settings an owner may change: types, ranges and names checked, the included file rendered."""

from __future__ import annotations

import pytest

from panel.clusters.lib import tunables
from panel.clusters.lib.pgconf import ServerSettings


def test_every_valid_value_comes_back_in_its_type() -> None:
    changes = {
        "work_mem": 16,
        "statement_timeout": 0,
        "log_min_duration_statement": -1,
        "temp_file_limit": -1,
        "jit": False,
        "track_io_timing": "on",
        "timezone": "Europe/Paris",
    }
    assert tunables.validate(changes) == changes


@pytest.mark.parametrize(
    ("changes", "key", "words"),
    [
        ({"work_mem": "16"}, "work_mem", "whole number of MB"),
        ({"work_mem": True}, "work_mem", "whole number"),
        ({"work_mem": 0}, "work_mem", "between 1 and 1024"),
        ({"work_mem": 1025}, "work_mem", "between 1 and 1024"),
        ({"deadlock_timeout": 499}, "deadlock_timeout", "between 500"),
        ({"log_min_duration_statement": -2}, "log_min_duration_statement", "between -1"),
        ({"jit": "yes"}, "jit", "true or false"),
        ({"track_io_timing": True}, "track_io_timing", "on, off"),
        ({"timezone": "Mars/Olympus"}, "timezone", "time zone"),
        ({"timezone": "UTC'\nshared_preload_libraries = 'evil"}, "timezone", "time zone"),
        (
            {"shared_preload_libraries": "evil", "max_connections": 5000},
            "unknown",
            "max_connections, shared_preload",
        ),
    ],
)
def test_a_bad_value_or_an_unknown_name_is_refused(changes: dict, key: str, words: str) -> None:
    with pytest.raises(tunables.InvalidSettings) as refused:
        tunables.validate(changes)
    assert words in refused.value.problems[key]


def test_every_problem_is_told_at_once() -> None:
    with pytest.raises(tunables.InvalidSettings) as refused:
        tunables.validate({"work_mem": -5, "jit": 3, "ssl": "off"})
    assert set(refused.value.problems) == {"work_mem", "jit", "unknown"}


def test_the_file_holds_only_the_settings_set_in_postgresqls_base_units() -> None:
    text = tunables.render({"work_mem": 16, "jit": False, "timezone": "Europe/Paris", "temp_file_limit": -1})
    lines = text.splitlines()
    assert lines[0].startswith("#")
    assert lines[1:] == ["jit = off", "temp_file_limit = -1", "timezone = 'Europe/Paris'", "work_mem = 16384"]


def test_a_row_edited_by_hand_puts_nothing_else_in_the_file() -> None:
    text = tunables.render({"work_mem": 8, "shared_preload_libraries": "evil", "statement_timeout": "1; x"})
    assert text.splitlines()[1:] == ["work_mem = 8192"]


def test_defaults_fill_what_was_not_set() -> None:
    values = tunables.effective({"work_mem": 32, "gone": 1})
    assert values["work_mem"] == 32 and values["jit"] is True and values["timezone"] == "UTC"
    assert list(values) == [t.name for t in tunables.TUNABLES]


def test_pg_settings_is_compared_in_base_units() -> None:
    assert tunables.TUNABLES_BY_NAME["work_mem"].in_pg_settings(16) == "16384"
    assert tunables.TUNABLES_BY_NAME["jit"].in_pg_settings(False) == "off"
    assert tunables.TUNABLES_BY_NAME["autovacuum_naptime"].in_pg_settings(30) == "30"


def test_command_line_text_is_typed_then_validated() -> None:
    assert tunables.parse_text("work_mem", " 64 ") == 64
    assert tunables.parse_text("jit", "off") is False
    assert tunables.parse_text("work_mem", "64MB") == "64MB"  # refused by validate, with its reason
    assert tunables.parse_text("timezone", "UTC") == "UTC"


def test_panel_conf_includes_the_owners_file_last() -> None:
    conf = ServerSettings(
        port=5432,
        listen_addresses="127.0.0.1",
        socket_dir="/run/x",
        max_connections=25,
        superuser_reserved_connections=3,
        shared_buffers_bytes=256 * 1024**2,
        log_dir="/log",
        includes=("settings.conf",),
    )
    lines = conf.render().splitlines()
    assert lines[-1] == "include_if_exists = 'settings.conf'"
    assert lines.index("timezone = 'UTC'") < len(lines) - 1
