"""Fuzzing the pgbench output parser: real captured streams garbled as pgbench's threads garble
them (writes interleaved mid-line, lines cut, newlines lost) never crash it and never make it
invent a progress sample from a broken line."""

from __future__ import annotations

import random

import pytest

from benchmarks.lib.pgbench_output import (
    ProgressSample,
    ProgressShape,
    StderrParser,
    parse_error_line,
    parse_progress_line,
    parse_summary,
)
from benchmarks.tests.pgbench_captures import FIXTURES, RUNS, load, sample_values, shape_for

# What other threads write into stderr while thread 0 prints progress: pg_log's separate writes
# ("pgbench:", " ", "error: ") and whole message bodies ending with a newline.
FOREIGN_WRITES = ["pgbench:", " ", "error: ", "pgbench: ", "detail: ", "\n"] + [
    line + "\n"
    for name in (
        "f2_sess20_c150_qwt5.tagged.txt",
        "b2_direct_c150_connect_per_tx.tagged.txt",
        "g1_stmt20_tpcb_c10.tagged.txt",
    )
    for line in load(name).stderr
    if not line.startswith("progress: ")
][:40]


def _same_core(sample: ProgressSample, intact: ProgressSample) -> bool:
    """Same measured values; optional parts may be missing (line cut at a part boundary)."""
    if sample_values(sample)[:4] != sample_values(intact)[:4]:
        return False
    optional = ("failed", "lag_ms", "skipped", "retried", "retries")
    return all(getattr(sample, name) in (None, getattr(intact, name)) for name in optional)


def _garble(rng: random.Random, stream: str) -> str:
    """Insert other threads' writes at random byte positions, then maybe cut the tail off."""
    positions = sorted(rng.randrange(len(stream) + 1) for _ in range(rng.randint(1, 12)))
    pieces: list[str] = []
    previous = 0
    for position in positions:
        pieces.append(stream[previous:position])
        write = rng.choice(FOREIGN_WRITES)
        if rng.random() < 0.3:  # a message body can itself arrive cut by the capture
            write = write[: rng.randrange(len(write) + 1)]
        pieces.append(write)
        previous = position
    pieces.append(stream[previous:])
    garbled = "".join(pieces)
    if rng.random() < 0.3:  # pgbench killed mid-line
        garbled = garbled[: rng.randrange(len(garbled) + 1)]
    if rng.random() < 0.3:  # a lost newline joins two lines
        newlines = [index for index, char in enumerate(garbled) if char == "\n"]
        if newlines:
            index = rng.choice(newlines)
            garbled = garbled[:index] + garbled[index + 1 :]
    return garbled


@pytest.mark.parametrize("name", sorted(name for name, expected in RUNS.items() if expected.samples))
def test_fuzzed_garbling_never_yields_a_sample_from_a_broken_line(name: str) -> None:
    capture = load(name)
    shape = shape_for(capture.command)
    progress_lines = [line for line in capture.stderr if line.startswith("progress: ")]
    intact = {parse_progress_line(line, shape) for line in progress_lines}
    stream = "".join(line + "\n" for line in capture.stderr)
    rng = random.Random(f"pgbench-fuzz-{name}")
    produced = 0
    for _ in range(150):
        for use_shape in (True, False):
            parser = StderrParser(shape if use_shape else None)
            for line in _garble(rng, stream).split("\n"):
                event = parser.feed(line)
                if isinstance(event, ProgressSample):
                    produced += 1
                    if use_shape:
                        assert event in intact, line
                    else:  # without the shape, a line cut before ", lag" still has true core values
                        assert any(_same_core(event, sample) for sample in intact if sample), line
    assert produced > 0  # the intact lines between the garbled ones still count


def test_fuzzed_cuts_and_concatenations_of_real_lines_never_raise() -> None:
    rng = random.Random(15)
    lines = [line for name in sorted(RUNS) for line in load(name).stderr + load(name).stdout]
    lines += (FIXTURES / "init_s20.stderr.txt").read_text().splitlines()
    alphabet = "progress: 0123456789.,s tpslatmsfailedlagskippedretried\r\t()%/:-"
    for _ in range(3000):
        first, second = rng.choice(lines), rng.choice(lines)
        candidates = [
            first[: rng.randrange(len(first) + 1)] + second[rng.randrange(len(second) + 1) :],
            first + second,
            "".join(rng.choice(alphabet) for _ in range(rng.randrange(80))),
        ]
        parser = StderrParser(ProgressShape())
        for candidate in candidates:
            parser.feed(candidate)
            parse_error_line(candidate)
            parse_summary(candidate)
