"""The real pgbench captures in ``fixtures/pgbench`` and what each run's output must parse to,
shared by the ``test_lib_pgbench_output_*`` modules: loading a tagged capture, parsing it as the
runner does, and the samples and summary figures expected of every captured run."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from benchmarks.lib.pgbench_output import (
    ErrorLine,
    ProgressSample,
    ProgressShape,
    StderrParser,
    Summary,
    classify_exit,
    parse_summary,
)

FIXTURES = Path(__file__).parent / "fixtures" / "pgbench"
TAGGED_LINE = re.compile(r"\[\s*[\d.]+\] ([OE])\| ?(.*)")
RESERVED = "remaining connection slots are reserved for non-replication superuser connections"


@dataclass
class Capture:
    command: str
    stdout: list[str]
    stderr: list[str]
    exit_code: int


def load(name: str) -> Capture:
    lines = (FIXTURES / name).read_text().splitlines()
    stdout: list[str] = []
    stderr: list[str] = []
    exit_code = -1
    for line in lines:
        match = TAGGED_LINE.fullmatch(line)
        if match:
            (stdout if match.group(1) == "O" else stderr).append(match.group(2))
        elif found := re.search(r"exit_code=(\d+)", line):
            exit_code = int(found.group(1))
    return Capture(lines[0].removeprefix("$ "), stdout, stderr, exit_code)


def shape_for(command: str) -> ProgressShape:
    """What the run's command line says its progress lines carry."""
    rate = "--rate" in command or " -R " in command
    limit = "--latency-limit" in command or " -L " in command
    tries = re.search(r"--max-tries=(\d+)", command)
    return ProgressShape(lag=rate, skipped=rate and limit, retries=bool(tries and tries.group(1) != "1"))


@dataclass
class Parsed:
    samples: list[ProgressSample]
    errors: list[ErrorLine]
    parser: StderrParser
    summary: Summary | None
    status: tuple[str, str]


def parse(name: str, *, with_shape: bool = True) -> Parsed:
    capture = load(name)
    parser = StderrParser(shape_for(capture.command) if with_shape else None)
    events = [parser.feed(line) for line in capture.stderr]
    summary = parse_summary("\n".join(capture.stdout), run_aborted=parser.run_aborted)
    return Parsed(
        samples=[event for event in events if isinstance(event, ProgressSample)],
        errors=[event for event in events if isinstance(event, ErrorLine)],
        parser=parser,
        summary=summary,
        status=classify_exit(capture.exit_code, summary, parser.errors),
    )


@dataclass(frozen=True)
class Expected:
    samples: int
    first: tuple[float, float, float, float, int] | None  # elapsed, tps, lat, stddev, failed
    last: tuple[float, float, float, float, int] | None
    tps: float | None
    latency_avg_ms: float | None
    processed: int | None


RUNS = {
    "a_direct_c50.tagged.txt": Expected(
        30, (1.0, 1692.7, 20.273, 7.558, 0), (30.0, 2391.3, 19.678, 8.656, 0), 2343.643052, 20.435, 69970
    ),
    "b2_direct_c150_connect_per_tx.tagged.txt": Expected(
        20, (1.1, 33.6, 519.162, 285.793, 0), (20.0, 129.4, 690.610, 346.040, 0), 132.058020, 636.621, 2661
    ),
    "b_direct_c150.tagged.txt": Expected(0, None, None, None, None, None),
    "c_pool97_tx_c150.tagged.txt": Expected(
        30, (1.0, 693.6, 108.185, 23.442, 0), (30.0, 1552.2, 97.169, 14.279, 0), 1517.216810, 98.501, 44939
    ),
    "f2_sess20_c150_qwt5.tagged.txt": Expected(
        15, (1.0, 931.9, 10.993, 2.564, 0), (15.0, 2107.9, 9.431, 2.126, 0), 1882.703823, 10.538, 27366
    ),
    "fmt11_prepared_via_txpool.tagged.txt": Expected(
        5, (1.0, 2038.9, 0.968, 0.635, 0), (5.0, 1924.0, 1.039, 0.711, 0), 1983.302577, 1.008, 9895
    ),
    "fmt1_failures_maxtries1.tagged.txt": Expected(
        10, (1.0, 1338.4, 1.561, 0.663, 4048), (10.0, 1365.5, 1.605, 0.769, 4176), 1369.564881, 1.603, 13643
    ),
    "fmt2_failures_maxtries3_r.tagged.txt": Expected(
        10, (1.0, 1292.4, 2.897, 1.983, 1006), (10.0, 1395.9, 2.771, 1.844, 1128), 1394.914563, 2.749, 13900
    ),
    "fmt3_tpcb_r_aggregate_log.tagged.txt": Expected(
        15, (1.0, 2481.4, 3.698, 1.546, 0), (15.0, 2534.8, 3.886, 1.521, 0), 2573.808095, 3.823, 38545
    ),
    "fmt4_rate500_latlimit10.tagged.txt": Expected(
        15, (1.0, 454.0, 1.728, 0.941, 0), (15.0, 499.0, 1.328, 0.494, 0), 496.354340, 1.430, 7423
    ),
    "fmt6_rate500_only.tagged.txt": Expected(
        10, (1.0, 472.0, 1.198, 0.749, 0), (10.0, 478.9, 1.054, 0.600, 0), 498.047357, 1.057, 4962
    ),
    "fmt7_rate5000_latlimit5_skips.tagged.txt": Expected(
        10, (1.0, 2652.2, 7.759, 1.532, 0), (10.0, 2961.1, 7.473, 1.513, 0), 2634.298151, 7.940, 26315
    ),
    "g1_stmt20_tpcb_c10.tagged.txt": Expected(0, None, None, None, None, 0),
    "g3_stmt20_S_c10.tagged.txt": Expected(
        20, (1.0, 8765.9, 1.088, 0.745, 0), (20.0, 13502.8, 0.725, 0.328, 0), 11725.926432, 0.838, 234159
    ),
    "pause_zero_tps_intervals.tagged.txt": Expected(
        10, (1.0, 2039.9, 4.757, 1.625, 0), (10.0, 2152.4, 4.640, 1.616, 0), 1357.014276, 7.357, 13545
    ),
    "local_custom_no_tables_vacuum.tagged.txt": Expected(0, None, None, 12105.072025, 0.165, 100),
    "local_latlimit_only.tagged.txt": Expected(
        2, (1.0, 1607.8, 1.230, 0.910, 0), (2.0, 1546.0, 1.294, 1.444, 0), 1578.163340, 1.263, 3156
    ),
    "local_no_progress_T2.tagged.txt": Expected(0, None, None, 1700.693875, 2.352, 3402),
    "local_nonowner_vacuum_t20.tagged.txt": Expected(0, None, None, 1424.045, 1.404, 40),
    "local_progress_timestamp.tagged.txt": Expected(
        2,
        (1795355718.749, 37154.3, 0.051, 0.139, 0),
        (1795355719.751, 29290.9, 0.066, 0.327, 0),
        33386.881569,
        0.058,
        66485,
    ),
    "local_too_many_clients.tagged.txt": Expected(0, None, None, None, None, None),
    "local_txlog_rate_retries.tagged.txt": Expected(
        3, (1.0, 216.0, 5.094, 4.239, 0), (3.0, 196.0, 1.762, 2.283, 0), 200.322992, 2.954, 599
    ),
}
# The runs that did not simply succeed: their status and reason (the others: SUCCEEDED, "").


def sample_values(sample: ProgressSample) -> tuple[float, float, float, float, int | None]:
    """A sample's elapsed time, TPS, latency, its standard deviation and failures, to compare."""
    return (sample.elapsed_s, sample.tps, sample.latency_avg_ms, sample.latency_stddev_ms, sample.failed)
