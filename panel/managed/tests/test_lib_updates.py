"""Versions, windows and tags, pure: on the tools' real ``--version`` lines of this machine."""

from __future__ import annotations

import datetime as dt

import pytest

from panel.clusters.lib.plans import PLANS_BY_SLUG
from panel.managed.lib.tags import bad_tags
from panel.managed.lib.updates import in_window, newer, parse_hour, parse_version
from panel.managed.services.autoscale import next_plan


def test_it_reads_the_tools_version_lines() -> None:
    assert parse_version("postgres (PostgreSQL) 15.20 (Debian 15.20-0+deb12u1)\n") == "15.20"
    assert parse_version("PgBouncer 1.18.0\nlibevent 2.1.12-stable\n") == "1.18.0"
    assert parse_version("15.20 (Debian 15.20-0+deb12u1)") == "15.20"  # SHOW server_version
    assert parse_version("no version here") == ""


@pytest.mark.parametrize(
    ("installed", "running", "pending"),
    [
        ("15.20", "15.18", True),
        ("15.20", "15.20", False),
        ("15.9", "15.10", False),  # numbers, not text
        ("16.1", "15.20", False),  # a new major is an upgrade, not an update
        ("1.18.1", "1.18.0", True),
        ("", "15.20", False),
        ("15.20", "", False),
    ],
)
def test_an_update_is_a_newer_minor_of_the_same_major(installed: str, running: str, pending: bool) -> None:
    assert newer(installed, running) is pending


def test_the_window_is_one_hour_of_one_weekday_in_utc() -> None:
    tuesday_1430 = dt.datetime(2026, 11, 24, 14, 30, tzinfo=dt.UTC)
    assert in_window(tuesday_1430, "tuesday", 14)
    assert not in_window(tuesday_1430, "tuesday", 13)
    assert not in_window(tuesday_1430, "monday", 14)
    berlin = dt.timezone(dt.timedelta(hours=1))
    assert in_window(tuesday_1430.astimezone(berlin), "tuesday", 14)


@pytest.mark.parametrize(
    ("text", "hour"),
    [("14:00", 14), ("14:00:00", 14), ("3", 3), ("23:00", 23), ("24:00", None), ("14:30", None), ("x", None)],
)
def test_the_hour_is_a_whole_hour(text: str, hour: int | None) -> None:
    assert parse_hour(text) == hour


def test_tags_are_names_without_spaces() -> None:
    assert bad_tags(["prod", "team:web", "a.b-c_d"]) == []
    assert bad_tags(["two words", "", "x" * 256]) == ["two words", "", "x" * 256]


def test_the_next_plan_has_at_least_the_increment_more_disk() -> None:
    one = PLANS_BY_SLUG["db-s-1vcpu-1gb"]  # 10 GB
    assert next_plan(one, 10).slug == "db-s-1vcpu-2gb"  # 25 GB
    assert next_plan(one, 20).slug == "db-s-2vcpu-4gb"  # 38 GB
    assert next_plan(PLANS_BY_SLUG["db-s-16vcpu-64gb"], 1) is None
