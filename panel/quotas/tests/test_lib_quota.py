"""The quota rules and repquota's layout (pure units)."""

from __future__ import annotations

import pytest

from panel.quotas.lib.quota import (
    DEFAULT_GRACE_SECONDS,
    Limit,
    QuotaInputError,
    ReportRow,
    State,
    check_limits,
    flags,
    grace_left_text,
    human_count,
    human_space,
    judge,
    parse_count,
    parse_size,
    render_report,
)

DAY = 86400


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("100M", 100 * 1024**2),
        ("2G", 2 * 1024**3),
        ("512k", 512 * 1024),
        ("1T", 1024**4),
        ("4096", 4096),
        ("0", 0),
        (" 3MiB ", 3 * 1024**2),
        (7, 7),
    ],
)
def test_sizes_as_setquota_takes_them(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "-1", "1.5G", "ten", "5X", "G", -3])
def test_a_size_that_is_not_one_says_so(text):
    with pytest.raises(QuotaInputError):
        parse_size(text)


def test_relation_counts_take_powers_of_1000():
    assert parse_count("10k") == 10_000 and parse_count("2m") == 2_000_000 and parse_count("500") == 500
    with pytest.raises(QuotaInputError):
        parse_count("1.5k")


def test_a_soft_limit_above_the_hard_one_is_refused_but_no_limit_on_either_side_is_fine():
    with pytest.raises(QuotaInputError, match="soft space limit is above"):
        check_limits(200, 100)
    check_limits(200, 0)
    check_limits(0, 100)
    check_limits(100, 100)


@pytest.mark.parametrize(
    ("num_bytes", "text"),
    [
        (0, "0K"),
        (1, "1K"),
        (5 * 1024**2, "5120K"),
        (100 * 1024**2, "100M"),
        (150 * 1024**2 + 1, "151M"),
        (100 * 1024**3, "100G"),
        (99 * 1024**3, "101376M"),
    ],
)
def test_space_is_shown_as_repquota_s_shows_it(num_bytes, text):
    assert human_space(num_bytes) == text


def test_counts_are_shown_as_repquota_s_shows_them():
    assert human_count(99_999) == "99999"
    assert human_count(100_000) == "100k"
    assert human_count(250_000_001) == "251m"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (7 * DAY, "7days"),
        (6 * DAY + 3600, "6days"),
        (2 * DAY, "2days"),
        (47 * 3600 + 1800, "47:30"),
        (13 * 3600 + 2 * 60 + 10, "13:02"),
        (0, "none"),
        (-5, "none"),
    ],
)
def test_the_grace_column(seconds, text):
    assert grace_left_text(seconds) == text


def test_the_state_machine_ok_over_soft_enforced_and_back():
    grace = DEFAULT_GRACE_SECONDS
    under = judge(
        Limit(90, 100, 200), Limit(1), over_since=None, now=1000, space_grace=grace, files_grace=grace
    )
    assert under.state is State.OK and under.over_since is None
    over = judge(
        Limit(150, 100, 200), Limit(1), over_since=None, now=1000, space_grace=grace, files_grace=grace
    )
    assert over.state is State.OVER_SOFT and over.over_since == 1000
    still = judge(
        Limit(150, 100, 200),
        Limit(1),
        over_since=1000,
        now=1000 + grace - 1,
        space_grace=grace,
        files_grace=grace,
    )
    assert still.state is State.OVER_SOFT
    expired = judge(
        Limit(150, 100, 200),
        Limit(1),
        over_since=1000,
        now=1000 + grace,
        space_grace=grace,
        files_grace=grace,
    )
    assert expired.state is State.ENFORCED and "grace period over" in expired.reason
    hard = judge(Limit(200, 100, 200), Limit(1), over_since=None, now=5, space_grace=grace, files_grace=grace)
    assert hard.state is State.ENFORCED and hard.reason == "space hard limit"
    files = judge(Limit(1), Limit(11, 0, 10), over_since=None, now=5, space_grace=grace, files_grace=grace)
    assert files.state is State.ENFORCED and files.reason == "relations hard limit"
    back = judge(
        Limit(99, 100, 200), Limit(1), over_since=1000, now=99_999_999, space_grace=grace, files_grace=grace
    )
    assert back.state is State.OK and back.over_since is None


def test_no_limit_never_acts():
    verdict = judge(Limit(10**15), Limit(10**9), over_since=None, now=0, space_grace=0, files_grace=0)
    assert verdict.state is State.OK


def test_the_flag_column():
    assert flags(Limit(1, 10), Limit(1, 10)) == "--"
    assert flags(Limit(11, 10), Limit(1, 10)) == "+-"
    assert flags(Limit(1, 10), Limit(11, 10)) == "-+"
    assert flags(Limit(11, 10), Limit(10, 0, 10)) == "++"


def test_the_report_layout():
    now = 1_000_000.0
    rows = [
        ReportRow(
            "appdb", Limit(150 * 1024**2, 100 * 1024**2, 200 * 1024**2), Limit(40, 0, 0), over_since=now - DAY
        ),
        ReportRow("logs", Limit(5 * 1024**2), Limit(12)),
    ]
    text = render_report(
        rows, title="db-main", kind="database", space_grace=7 * DAY, files_grace=7 * DAY, now=now
    )
    lines = text.splitlines()
    assert lines[0] == "*** Report for database quotas on db-main"
    assert lines[1] == "Block grace time: 7days; Inode grace time: 7days"
    assert lines[3].startswith("Database        used    soft    hard  grace")
    assert lines[4] == "-" * 70
    assert lines[5].split() == ["appdb", "+-", "150M", "100M", "200M", "6days", "40", "0", "0"]
    assert lines[6].split() == ["logs", "--", "5120K", "0K", "0K", "12", "0", "0"]


def test_a_watermark_turns_full_at_the_high_mark_and_back_only_under_the_low_one():
    from panel.quotas.lib.quota import watermark

    assert watermark(False, 94.9, high=95, low=90) is None
    assert watermark(False, 95.0, high=95, low=90) is True
    assert watermark(True, 92.0, high=95, low=90) is None  # between the marks: stays full
    assert watermark(True, 89.9, high=95, low=90) is False
    assert watermark(False, 50.0, high=95, low=90) is None
