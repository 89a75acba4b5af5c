"""What ``pool_cost.py`` prints once the rounds ran: each variant's summary, ratios round by round,
and a verdict per goal. Numbers in, lines out (no Django, no processes); the statistics are
``_interleaved``'s."""

from __future__ import annotations

from dataclasses import dataclass

from _interleaved import compare, format_summary, summarize, within_verdict

# The "best" goal: the panel's pool within this fraction of the best configuration.
GOAL_TOLERANCE = 0.03


@dataclass(frozen=True)
class Scenario:
    clients: int
    churn: bool  # -C: a new connection per transaction

    @property
    def label(self) -> str:
        return f"{self.clients} clients" + (", -C (new connection per transaction)" if self.churn else "")


@dataclass(frozen=True)
class Run:
    """One pgbench run: its TPS, and the CPU time per transaction of everything that served it
    (pgbench, the server's processes, the variant's PgBouncer) and of its PgBouncer alone."""

    tps: float
    cpu_us: float
    bouncer_us: float


Results = dict[str, list[Run | None]]
# (scenario, variant) pairs where the server refused pgbench's connections (max_connections).
REFUSED: set[tuple[Scenario, str]] = set()


def tps_of(runs: list[Run | None]) -> list[float | None]:
    return [run.tps if run else None for run in runs]


def cpu_of(runs: list[Run | None]) -> list[float | None]:
    return [run.cpu_us if run else None for run in runs]


def bouncer_of(runs: list[Run | None]) -> list[float | None]:
    return [run.bouncer_us if run else None for run in runs]


def _summary_table(title: str, series: dict[str, list[float | None]]) -> None:
    width = max(len(n) for n in series)
    print(f"   {title}")
    for name, values in series.items():
        print(f"     {name:<{width}} {format_summary(summarize(values))}")


def _ratio(a: list[float | None], b: list[float | None]) -> str:
    c = compare(a, b)
    return f"{c.ratio:.2f} ({c.low:.2f}–{c.high:.2f})" if c.n and c.ratio is not None else "—"


def report(scenario: Scenario, runs: Results, reference: str = "panel") -> None:
    names = list(runs)
    width = max(len(n) for n in names)
    print(f"-- {scenario.label}: median of the rounds (min–max, IQR, spread = (max−min)/median)")
    _summary_table("TPS (higher is better):", {n: tps_of(r) for n, r in runs.items()})
    _summary_table(
        "CPU µs per transaction, pgbench + server + PgBouncer (lower is better):",
        {n: cpu_of(r) for n, r in runs.items()},
    )
    _summary_table("of which PgBouncer's own:", {n: bouncer_of(r) for n, r in runs.items() if n != "direct"})
    others = [o for o in ("direct", reference) if o in runs]
    print("   TPS ratios round by round, median (range), against: " + ", ".join(others))
    for name in names:
        parts = [
            f"{'—':<17}" if o == name else f"{_ratio(tps_of(runs[name]), tps_of(runs[o])):<17}"
            for o in others
        ]
        print(f"     {name:<{width}} " + "  ".join(parts))
    print(f"   verdict, {scenario.label}:")
    for line in verdicts(scenario, runs, reference):
        print(f"     {line}")


def verdicts(scenario: Scenario, runs: Results, reference: str) -> list[str]:
    """One line per goal by TPS, then the same by CPU per transaction, all of it and PgBouncer's
    alone (less sensitive to the machine's other load: efficiency = the other's CPU ÷ the panel's,
    above 1 when the panel is cheaper)."""
    lines: list[str] = []
    if reference not in runs:
        return lines
    mine = runs[reference]
    if "best" in runs:
        lines.append(
            "TPS: "
            + within_verdict(reference, "best", compare(tps_of(mine), tps_of(runs["best"])), GOAL_TOLERANCE)
        )
    if "hand" in runs:
        lines.append("TPS: " + compare(tps_of(mine), tps_of(runs["hand"])).verdict(reference, "hand"))
    if "direct" in runs:
        if summarize(tps_of(runs["direct"])).n == 0 and (scenario, "direct") in REFUSED:
            lines.append(
                f"TPS: {reference} ahead of direct by definition: the server refused direct's clients "
                "(more than its max_connections allows)"
            )
        else:
            lines.append("TPS: " + compare(tps_of(mine), tps_of(runs["direct"])).verdict(reference, "direct"))
    for other in ("best", "hand", "direct"):
        if other not in runs or summarize(cpu_of(runs[other])).n == 0:
            continue
        efficiency = compare(cpu_of(runs[other]), cpu_of(mine))
        if other == "best":
            lines.append("CPU/txn: " + within_verdict(reference, "best", efficiency, GOAL_TOLERANCE))
        else:
            lines.append("CPU/txn: " + efficiency.verdict(reference, other))
    for other in ("best", "hand"):
        if other in runs and summarize(bouncer_of(runs[other])).n:
            own = compare(bouncer_of(runs[other]), bouncer_of(mine))
            if other == "best":
                lines.append("PgBouncer's CPU/txn: " + within_verdict(reference, "best", own, GOAL_TOLERANCE))
            else:
                lines.append("PgBouncer's CPU/txn: " + own.verdict(reference, other))
    return lines
