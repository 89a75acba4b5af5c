"""The panel's session settings and the plan's bound on temporary files (pure units)."""

from __future__ import annotations

from panel.clusters.lib import pgconf, session


def test_the_startup_options_override_what_blinds_or_stalls_the_panel() -> None:
    options = session.PINNED_OPTIONS.split(" -c ")
    names = {part.removeprefix("-c ").split("=", 1)[0] for part in options}
    assert {
        "search_path",
        "local_preload_libraries",
        "statement_timeout",
        "lock_timeout",
        "idle_session_timeout",
        "idle_in_transaction_session_timeout",
    } <= names
    assert "-c local_preload_libraries= " in session.PINNED_OPTIONS + " "  # no library at all
    assert "read\\ committed" in session.PINNED_OPTIONS  # a blank in a value is escaped for libpq
    assert session.SEARCH_PATH_OPTION in session.PINNED_OPTIONS


def test_temporary_files_are_a_tenth_of_the_plans_disk_or_the_owners_lower_value() -> None:
    disk = 10 * 1024**3
    assert pgconf.temp_file_limit_kb(disk, -1) == 1024**2  # 1 GB in kB
    assert pgconf.temp_file_limit_kb(disk, 4096) == 4096
    assert pgconf.temp_file_limit_kb(disk, 10 * 1024**2) == 1024**2
    assert pgconf.render_temp_file_limit(4096).endswith("temp_file_limit = 4096kB\n")
