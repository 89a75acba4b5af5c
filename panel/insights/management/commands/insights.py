"""`manage.py insights …`: metrics and alert rules from the command line, in the foreground.

``collect`` and ``prune`` do what beat does; ``show`` prints a cluster's last collection like a
``top`` screen; ``alerts``, ``alert`` list, add, replace and delete alert rules with the Insights
tab's service functions and validation. Clusters are named by their name, as in ``manage.py
cluster``; when several users own a cluster of that name, ``--owner`` picks one.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError, CommandParser
from django.utils import timezone

from panel.clusters.face import PanelCommand, cluster_subcommands, find_cluster, human_size, print_table
from panel.clusters.models import Cluster
from panel.insights import services
from panel.insights.engine.collector import Snapshot
from panel.insights.engine.sources.postgres import STATES
from panel.insights.lib.metrics import HOST, SOURCES, label
from panel.insights.models import AlertKind, AlertRule
from panel.insights.services import alerts

# save_rule's field at fault → the option that sets it
OPTIONS = {"kind": "--kind", "threshold": "--threshold", "duration_seconds": "--duration", "email": "--email"}
# pool column → stored metric
POOL_FIGURES = {
    "clients_active": "pool_cl_active",
    "clients_waiting": "pool_cl_waiting",
    "servers_active": "pool_sv_active",
    "size": "pool_size",
    "xact_per_second": "pool_xact_ps",
    "maxwait_seconds": "pool_maxwait_seconds",
}
COUNTS = {"clients_active", "clients_waiting", "servers_active", "size"}


class Command(PanelCommand):
    help = "Collect and prune metrics, show a cluster's last figures, manage its alert rules."

    def add_arguments(self, parser: CommandParser) -> None:
        add = cluster_subcommands(parser)

        p = add("collect", "Collect every cluster (or one) once, now.", cluster=False, owner=True)
        p.add_argument("name", nargs="?", metavar="CLUSTER", help="cluster name (default: all)")
        add(
            "prune",
            "Build 1-minute, 5-minute, hourly and 4-hour rollups; delete expired points.",
            cluster=False,
        )
        add("token", "Print the bearer token /metrics expects.", cluster=False)

        p = add("show", "Show the figures of the cluster's last collection and its firing alerts.")
        p.add_argument("--format", dest="fmt", choices=("text", "json"), default="text")

        add("alerts", "List the cluster's alert rules and where each stands.")

        p = add("alert", "Add or replace the cluster's alert rule of a kind, or delete it.")
        p.add_argument("--kind", required=True, choices=AlertKind.values, help="what the rule watches")
        p.add_argument("--threshold", metavar="X", help="fire at or above X (percent, or waiting clients)")
        p.add_argument(
            "--duration", metavar="S", default="300", help="seconds the figure must hold (default 300)"
        )
        p.add_argument("--email", default="", help="recipient (default: the cluster owner's address)")
        p.add_argument("--disable", action="store_true", help="keep the rule but do not evaluate it")
        p.add_argument("--delete", action="store_true", help="delete the rule of this kind")

    def needs_database(self, options: dict[str, Any]) -> bool:
        return options.get("subcommand") != "token"  # a setting, readable before any migration

    field_labels = OPTIONS

    # --- collecting ----------------------------------------------------------------------------

    def do_token(self, options: dict[str, Any]) -> None:
        self.stdout.write(settings.PANEL_METRICS_TOKEN)

    def do_prune(self, options: dict[str, Any]) -> None:
        result = services.prune_and_rollup()
        self.stdout.write(", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in result.items()))

    def do_collect(self, options: dict[str, Any]) -> None:
        if options["name"]:
            cluster = find_cluster(options["name"], options.get("owner"))
            self._report(cluster.name, services.collect_cluster(cluster))
            return
        names = {str(pk): name for pk, name in Cluster.objects.values_list("id", "name")}
        for cluster_id, snap in services.collect_all().items():
            self._report(names.get(cluster_id) or cluster_id, snap)

    def _report(self, name: str, snap: Snapshot) -> None:
        up = ", ".join(
            f"{source} {'ok' if ok else 'down: ' + snap.errors.get(source, '')}"
            for source, ok in sorted(snap.up.items())
        )
        self.stdout.write(
            f"{name}: {len(snap.gauges)} gauges, {len(snap.counters)} counters, "
            f"{snap.query_seconds * 1000:.1f} ms of queries; {up}"
        )

    # --- the last collection -------------------------------------------------------------------

    def do_show(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["name"], options.get("owner"))
        data = figures(cluster)
        if options["fmt"] == "json":
            self.stdout.write(json.dumps(data, indent=2))
            return
        self._screen(cluster, data)

    def _screen(self, cluster: Cluster, data: dict[str, Any]) -> None:
        write = self.stdout.write
        if data["collected_at"] is None:
            write(
                f"{cluster.name}: no metrics yet. The collector runs every {data['interval_seconds']} s; "
                f"collect now with: manage.py insights collect {cluster.name}"
            )
        else:
            at = dt.datetime.fromisoformat(data["collected_at"])
            when = f"{cluster.name}: collected {_utc(at)} ({_ago(data['age_seconds'])} ago)"
            if data["stale"]:
                when = self.style.WARNING(
                    f"{when}, stale: older than 3 intervals of {data['interval_seconds']} s"
                )
            write(when)
            for source in (s for s, up in data["sources"].items() if not up):
                write(self.style.WARNING(f"{source} was down at this collection: its figures are missing"))
            self._figures(data)
        firing = data["alerts_firing"]
        if not firing:
            write("\nNo alerts firing.")
            return
        write(self.style.ERROR(f"\n{len(firing)} alert{'s' if len(firing) > 1 else ''} firing:"))
        for alert in firing:
            write(
                f"  {alert['title']} at {_num(alert['value'])}, at or above {alert['threshold']:g} "
                f"for {alert['duration_seconds']} s, since {_utc(dt.datetime.fromisoformat(alert['firing_since']))}"
            )

    def _figures(self, data: dict[str, Any]) -> None:
        conn = data["connections"]
        by_state = ", ".join(f"{state.replace('_', ' ')} {n}" for state, n in conn["by_state"].items())
        total = "-" if conn["total"] is None else str(conn["total"])
        if conn["max_connections"] is not None:
            total += f" of {conn['max_connections']} max_connections"
        if conn["percent"] is not None:
            total += f" ({conn['percent']:.1f}%)"
        lines = [("Connections", total + (f": {by_state}" if by_state else ""))]
        host = data["host"]
        if host is not None:
            load = " ".join("-" if v is None else f"{v:.2f}" for v in host["load"])
            disk = _pct(host["disk_percent"])
            if host["disk_used_bytes"] is not None:
                disk += f" of the filesystem; data directory {human_size(host['disk_used_bytes'])}"
            lines += [
                ("CPU", _pct(host["cpu_percent"])),
                ("Memory", "-" if host["memory_bytes"] is None else human_size(host["memory_bytes"])),
                ("Load", load),
                ("Disk", disk),
            ]
        self.stdout.write("")
        for name, value in lines:
            self.stdout.write(f"{name + ':':<12} {value}")
        if data["databases"]:
            self.stdout.write("")
            rows: list[tuple[str, ...]] = [
                (d["name"], _num(d["tps"]), _pct(d["cache_hit_percent"])) for d in data["databases"]
            ]
            print_table(self.stdout, ("DATABASE", "TPS", "CACHE HIT"), rows)
        if data["pools"]:
            self.stdout.write("")
            rows = [
                (
                    p["name"],
                    _num(p["clients_active"]),
                    _num(p["clients_waiting"]),
                    _num(p["servers_active"]),
                    _num(p["size"]),
                    _num(p["xact_per_second"]),
                    "-" if p["maxwait_seconds"] is None else f"{p['maxwait_seconds']:.2f} s",
                )
                for p in data["pools"]
            ]
            print_table(
                self.stdout, ("POOL", "CLIENTS", "WAITING", "SERVERS", "SIZE", "XACT/S", "LONGEST WAIT"), rows
            )

    # --- alert rules ---------------------------------------------------------------------------

    def do_alerts(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["name"], options.get("owner"))
        rules = list(AlertRule.objects.filter(cluster=cluster).select_related("state"))
        if not rules:
            self.stdout.write(
                f"No alert rules on {cluster.name}.\n"
                f"Add one with: manage.py insights alert {cluster.name} --kind KIND --threshold X"
            )
            return
        owner = f"owner ({cluster.owner.email})" if cluster.owner.email else "owner (no address)"
        rows = [
            (
                rule.kind,
                f"{rule.threshold:g}",
                f"{rule.duration_seconds} s",
                rule.email or owner,
                "yes" if rule.enabled else "no",
                _rule_state(rule),
            )
            for rule in rules
        ]
        print_table(self.stdout, ("KIND", "THRESHOLD", "FOR", "EMAIL", "ENABLED", "STATE"), rows)

    def do_alert(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["name"], options.get("owner"))
        kind = options["kind"]
        if options["delete"]:
            if options["threshold"] is not None or options["email"] or options["disable"]:
                raise CommandError("--delete takes no --threshold, --email or --disable.")
            rule = AlertRule.objects.filter(cluster=cluster, kind=kind).first()
            if rule is None:
                raise CommandError(f"{cluster.name} has no {kind} alert.")
            alerts.delete_rule(rule)
            self.stdout.write(self.style.SUCCESS(f"Deleted the {kind} alert of {cluster.name}."))
            return
        if options["threshold"] is None:
            raise CommandError("Give --threshold X (or --delete).")
        existed = AlertRule.objects.filter(cluster=cluster, kind=kind).exists()
        # Text as typed: save_rule's checks say what is wrong with it, as on the Insights tab.
        rule = services.save_rule(
            cluster,
            kind,
            options["threshold"],
            options["duration"],
            enabled=not options["disable"],
            email=options["email"],
        )
        recipient = rule.email or f"the owner ({cluster.owner.email or 'no address'})"
        self.stdout.write(
            self.style.SUCCESS(
                f"{'Replaced' if existed else 'Added'} the {kind} alert of {cluster.name}: "
                f"{AlertKind(kind).label} at or above {rule.threshold:g} for {rule.duration_seconds} s, "
                f"email to {recipient}{'' if rule.enabled else ', disabled'}."
            )
        )

    # --- output ----------------------------------------------------------------------------------


def figures(cluster: Cluster, now: dt.datetime | None = None) -> dict[str, Any]:
    """The last collection's figures as numbers (None: not read), and the firing alerts: what
    ``show --format json`` prints and what the text screen is drawn from."""
    now = now or timezone.now()
    last = services.latest(cluster, now=now)

    def by_label(metric: str) -> dict[str, float]:
        return {
            labels.partition("=")[2]: value
            for (name, labels), value in last.values.items()
            if name == metric and labels
        }

    sources = {s: last.get("up", label("source", s)) for s in SOURCES}
    tps, hit = by_label("tps"), by_label("cache_hit_percent")
    states = by_label("conn_state")
    ordered = [s for s in STATES if s in states] + sorted(set(states) - set(STATES))
    pools: dict[str, dict[str, float | None]] = {}
    for column, metric in POOL_FIGURES.items():
        for pool, value in by_label(metric).items():
            pools.setdefault(pool, dict.fromkeys(POOL_FIGURES))[column] = value
    host = None
    if cluster.is_local or sources[HOST] is not None:
        host = {
            "cpu_percent": last.get("cpu_percent"),
            "memory_bytes": _int(last.get("memory_bytes")),
            "load": [last.get(m) for m in ("load1", "load5", "load15")],
            "disk_percent": last.get("disk_percent"),
            "disk_used_bytes": _int(last.get("disk_used_bytes")),
        }
    return {
        "cluster": cluster.name,
        "collected_at": None if last.at is None else last.at.astimezone(dt.UTC).isoformat(),
        "age_seconds": None if last.at is None else (now - last.at).total_seconds(),
        "stale": last.stale,
        "interval_seconds": services.interval(),
        "sources": {s: up == 1 for s, up in sources.items() if up is not None},
        "connections": {
            "total": _int(last.get("conn_total")),
            "max_connections": _int(last.get("max_connections")),
            "percent": last.get("conn_percent"),
            "by_state": {s: int(states[s]) for s in ordered},
        },
        "host": host,
        "databases": [
            {"name": db, "tps": tps.get(db), "cache_hit_percent": hit.get(db)} for db in sorted({*tps, *hit})
        ],
        "pools": [
            {"name": pool, **{k: _int(v) if k in COUNTS else v for k, v in values.items()}}
            for pool, values in sorted(pools.items())
        ],
        "alerts_firing": [
            {
                "kind": rule.kind,
                "title": str(AlertKind(rule.kind).label),
                "threshold": rule.threshold,
                "duration_seconds": rule.duration_seconds,
                "value": rule.state.last_value,
                "firing_since": rule.state.firing_since.astimezone(dt.UTC).isoformat(),  # type: ignore[union-attr]
            }
            for rule in services.firing_alerts(cluster)
        ],
    }


def _rule_state(rule: AlertRule) -> str:
    """Where a rule stands, as the Insights tab's badge says it, with the last figure read."""
    if not rule.enabled:
        return "-"
    state = alerts.state_of(rule)
    if state is None:
        return "no data yet"
    last = "" if state.last_value is None else f" (last {state.last_value:.1f})"
    if state.firing_since is not None:
        return f"firing since {_utc(state.firing_since)}{last}"
    if state.pending_since is not None:
        return f"pending since {_utc(state.pending_since)}{last}"
    return f"ok{last}" if state.evaluated_at is not None else "no data yet"


def _int(value: float | None) -> int | None:
    return None if value is None else round(value)


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if value == int(value) else f"{value:.1f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def _utc(at: dt.datetime) -> str:
    return f"{at.astimezone(dt.UTC):%Y-%m-%d %H:%M:%S} UTC"


def _ago(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min"
    if seconds < 2 * 86400:
        return f"{seconds // 3600} h {seconds % 3600 // 60} min"
    return f"{seconds // 86400} days"
