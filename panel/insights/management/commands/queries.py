"""`manage.py queries …`: the Queries tab from the command line, with the same service functions.

``top`` lists a cluster's statements over a window (``--window 1h``, or a run's ``--start``/``--end``),
ordered like the tab's columns; ``show`` prints one statement's text and figures; ``reset`` calls
``pg_stat_statements_reset()`` on the cluster (``--yes`` is its confirmation); ``collect`` reads
the cluster once now, as the collector does every interval.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from django.core.management.base import CommandError, CommandParser

from panel.clusters.face import PanelCommand, cluster_subcommands, find_cluster, print_table
from panel.insights import services
from panel.insights.lib.statements import SORTS
from panel.insights.services import queries


class Command(PanelCommand):
    help = "List a cluster's top statements over a window (pg_stat_statements), show one, reset them."

    def add_arguments(self, parser: CommandParser) -> None:
        add = cluster_subcommands(parser)

        def windowed(p: argparse.ArgumentParser) -> None:
            p.add_argument("--window", choices=list(queries.WINDOWS), default=queries.DEFAULT_WINDOW)
            p.add_argument("--start", help="window start (ISO 8601, UTC unless an offset is given)")
            p.add_argument("--end", help="window end (ISO 8601); with --start instead of --window")
            p.add_argument("--format", dest="fmt", choices=("text", "json"), default="text")

        p = add("top", "The window's statements, by total time unless --by says otherwise.")
        windowed(p)
        p.add_argument(
            "--by", choices=list(SORTS), default="total", help="order (hit: worst cache use first)"
        )
        p.add_argument("--limit", type=int, default=20, metavar="N", help="at most N statements (default 20)")
        p = add("show", "One statement's full text and its figures over the window, per database and role.")
        p.add_argument("queryid", type=int, metavar="QUERYID")
        windowed(p)
        p = add("reset", "Reset the cluster's statement statistics (pg_stat_statements_reset()).")
        p.add_argument("--yes", action="store_true", help="confirm the reset")
        add("collect", "Collect the cluster now (every figure, statements included).")

    def _window(self, options: dict[str, Any]) -> queries.Window:
        if options.get("start") or options.get("end"):
            window = queries.window_between(options.get("start") or "", options.get("end") or "")
            if window is None:
                raise CommandError(
                    "--start and --end must both be times (ISO 8601), the end after the start."
                )
            return window
        return queries.window_of(options["window"])

    def _status(self, cluster: Any) -> None:
        state = queries.state_of(cluster)
        if state is None:
            self.stderr.write("No statement statistics collected yet: they start with the next collection.")
        elif state.status != "collecting":
            self.stderr.write(f"{state.get_status_display()}: {state.message}")

    def do_top(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["name"], options.get("owner"))
        if options["limit"] < 1:
            raise CommandError("--limit must be at least 1.")
        window = self._window(options)
        rows = queries.top_statements(cluster, window, by=options["by"], limit=options["limit"])
        if options["fmt"] == "json":
            self.stdout.write(json.dumps([_row_json(r) for r in rows], indent=2))
            return
        self._status(cluster)
        self.stdout.write(
            f"{cluster.name}: {window.start:%Y-%m-%d %H:%M:%S} – {window.end:%Y-%m-%d %H:%M:%S} UTC"
        )
        if not rows:
            self.stdout.write("No statements in this window.")
            return
        print_table(
            self.stdout,
            (
                "QUERYID",
                "CALLS",
                "TOTAL_MS",
                "MEAN_MS",
                "STDDEV_MS",
                "ROWS",
                "HIT%",
                "DATABASE",
                "ROLE",
                "STATEMENT",
            ),
            [_row_cells(r) for r in rows],
        )

    def do_show(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["name"], options.get("owner"))
        text = queries.statement_text(cluster, options["queryid"])
        if text is None:
            raise CommandError(f"No statement {options['queryid']} on {cluster.name}.")
        rows = queries.statement_rows(cluster, options["queryid"], self._window(options))
        if options["fmt"] == "json":
            self.stdout.write(json.dumps({"text": text, "lines": [_row_json(r) for r in rows]}, indent=2))
            return
        self.stdout.write(text)
        self.stdout.write("")
        if rows:
            print_table(
                self.stdout,
                ("QUERYID", "CALLS", "TOTAL_MS", "MEAN_MS", "STDDEV_MS", "ROWS", "HIT%", "DATABASE", "ROLE"),
                [_row_cells(r)[:-1] for r in rows],
            )
        else:
            self.stdout.write("It did not run in this window.")

    def do_reset(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["name"], options.get("owner"))
        if not options["yes"]:
            raise CommandError(
                f"This resets every statement counter of {cluster.name}; add --yes to confirm."
            )
        state = queries.reset_statements(cluster)
        self.stdout.write(f"{cluster.name}: statistics reset at {state.reset_at:%Y-%m-%d %H:%M:%S} UTC.")

    def do_collect(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["name"], options.get("owner"))
        snap = services.collect_cluster(cluster)
        collected = snap.statements
        if collected is None:
            self.stdout.write(f"{cluster.name}: statements not read ({', '.join(snap.errors.values())})")
            return
        stored = len(collected.deltas or [])
        message = f" ({collected.message})" if collected.message else ""
        self.stdout.write(f"{cluster.name}: {collected.status}{message}, {stored} statements stored")


def _row_cells(row: queries.Row) -> tuple[str, ...]:
    t = row.totals
    hit = "-" if t.hit_percent is None else f"{t.hit_percent:.1f}"
    text = " ".join(row.text.split())
    return (
        str(t.queryid),
        str(t.calls),
        f"{t.total_ms:.1f}",
        f"{t.mean_ms:.3f}",
        f"{t.stddev_ms:.3f}",
        str(t.rows),
        hit,
        t.database,
        t.role,
        text[:80] + ("…" if len(text) > 80 else ""),
    )


def _row_json(row: queries.Row) -> dict[str, Any]:
    t = row.totals
    return {
        "queryid": t.queryid,
        "database": t.database,
        "role": t.role,
        "calls": t.calls,
        "total_ms": t.total_ms,
        "mean_ms": t.mean_ms,
        "stddev_ms": t.stddev_ms,
        "rows": t.rows,
        "hit_percent": t.hit_percent,
        "text": row.text,
    }
