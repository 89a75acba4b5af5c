"""The pgbench output parser on ``pgbench -i`` output: the real captures' progress lines, phases
and closing timings, and progress rewritten in place with carriage returns."""

from __future__ import annotations

from benchmarks.lib.pgbench_output import (
    ErrorLine,
    InitDone,
    InitPhase,
    InitProgress,
    ProgressSample,
    StderrParser,
    parse_stderr,
    parse_summary,
)
from benchmarks.tests.pgbench_captures import FIXTURES, load


def test_init_progress_phases_and_done() -> None:
    events = parse_stderr((FIXTURES / "init_s20.stderr.txt").read_text())
    progress = [event for event in events if isinstance(event, InitProgress)]
    assert len(progress) == 20
    assert progress[0] == InitProgress(100000, 2000000, 5, 0.03, 0.57)
    assert progress[-1] == InitProgress(2000000, 2000000, 100, 2.23, 0.0)
    phases = [event.step for event in events if isinstance(event, InitPhase)]
    assert phases == ["drop_tables", "create_tables", "generate_client", "vacuum", "primary_keys"]
    done = [event for event in events if isinstance(event, InitDone)]
    assert done == [
        InitDone(
            3.87,
            {
                "drop tables": 0.0,
                "create tables": 0.0,
                "client-side generate": 2.56,
                "vacuum": 0.27,
                "primary keys": 1.03,
            },
        )
    ]
    assert not [event for event in events if isinstance(event, ErrorLine | ProgressSample)]


def test_init_quiet_and_steps_variants() -> None:
    quiet = parse_stderr((FIXTURES / "init_s20_quiet.txt").read_text())
    assert [event for event in quiet if isinstance(event, InitProgress)] == [
        InitProgress(2000000, 2000000, 100, 2.31, 0.0)
    ]
    steps = parse_stderr((FIXTURES / "init_steps_dtgvp.txt").read_text())
    assert len([event for event in steps if isinstance(event, InitProgress)]) == 20
    local = load("local_init_s3.tagged.txt")
    events = parse_stderr("\n".join(local.stderr))
    assert [event.percent for event in events if isinstance(event, InitProgress)] == [33, 66, 100]
    assert parse_summary("\n".join(local.stdout)) is None


def test_carriage_return_progress_keeps_the_last_state() -> None:
    parser = StderrParser()
    line = (
        "100000 of 300000 tuples (33%) done (elapsed 0.08 s, remaining 0.16 s)\r"
        "200000 of 300000 tuples (66%) done (elapsed 0.17 s, remaining 0.08 s)\r"
    )
    assert parser.feed(line) == InitProgress(200000, 300000, 66, 0.17, 0.08)
