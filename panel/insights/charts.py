"""The Insights tab's chart catalogue (which lines each chart draws, from which series) and the JSON
a page's charts receive: every line of every chart read at once (``services.read_series``), then
shaped per chart (shared times, summed lines, each bucket's peak for the tooltip)."""

from __future__ import annotations

from dataclasses import dataclass

from django.utils import timezone
from django.utils.functional import Promise
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from panel.clusters.models import Cluster
from panel.insights import services
from panel.insights.forms import Window
from panel.insights.lib.metrics import label as metric_label
from panel.insights.lib.metrics import split_label

StrOrPromise = str | Promise


@dataclass(frozen=True)
class Line:
    """One line of a chart: ``metric`` per label value ("each"), summed over labels ("sum"), or the
    series with ``labels`` ("one"). ``limit`` lines (max_connections, a pool's size) are dashed."""

    metric: str
    mode: str = "one"
    title: StrOrPromise = ""
    labels: str = ""
    axis: str = "y"
    limit: bool = False


@dataclass(frozen=True)
class Chart:
    key: str
    title: StrOrPromise
    unit: str
    lines: tuple[Line, ...]
    unit2: str = ""  # unit of the right-hand axis, for lines with axis "y1"
    max: int | None = None  # percentages stop at 100
    group: str = "database"  # "database", "host" or "pool": a heading on the tab


# The dashed limit line of every connections chart.
MAX_CONNECTIONS = Line("max_connections", title=gettext_lazy("max_connections"), limit=True)


def _connections(key: str, title: StrOrPromise, metric: str) -> Chart:
    """A connections chart: a line per label value of ``metric``, under max_connections."""
    return Chart(key, title, "", (Line(metric, "each"), MAX_CONNECTIONS))


DATABASE_CHARTS = (
    Chart(
        "tps",
        gettext_lazy("Throughput (transactions per second, per database)"),
        "1/s",
        (Line("tps", "each"),),
    ),
    _connections("connections", gettext_lazy("Connections by state"), "conn_state"),
    _connections("connections_user", gettext_lazy("Connections by user"), "conn_user"),
    _connections("connections_db", gettext_lazy("Connections by database"), "conn_db"),
    Chart("cache", gettext_lazy("Cache hit ratio (%)"), "%", (Line("cache_hit_percent", "each"),), max=100),
    Chart(
        "tuples",
        gettext_lazy("Rows per second (all databases)"),
        "1/s",
        (
            Line("tup_fetched_ps", "sum", gettext_lazy("fetched")),
            Line("tup_inserted_ps", "sum", gettext_lazy("inserted")),
            Line("tup_updated_ps", "sum", gettext_lazy("updated")),
            Line("tup_deleted_ps", "sum", gettext_lazy("deleted")),
        ),
    ),
    Chart(
        "scans",
        gettext_lazy("Index vs sequential scans per second"),
        "1/s",
        (
            Line("idx_scan_ps", "sum", gettext_lazy("index scans")),
            Line("seq_scan_ps", "sum", gettext_lazy("sequential scans")),
        ),
    ),
    Chart(
        "deadlocks",
        gettext_lazy("Deadlocks and temporary files"),
        "1/s",
        (
            Line("deadlocks_ps", "sum", gettext_lazy("deadlocks per second")),
            Line("temp_bytes_ps", "sum", gettext_lazy("temp bytes per second"), axis="y1"),
        ),
        unit2="B/s",
    ),
    Chart("db_size", gettext_lazy("Database sizes"), "B", (Line("db_size_bytes", "each"),)),
)
# One line per standby member or read-only replica (``member=replica:NAME``), in bytes behind.
REPLICATION_CHART = Chart(
    "replication",
    gettext_lazy("Replication lag"),
    "B",
    (Line("replication_lag_bytes", "each"),),
    group="replication",
)
HOST_CHARTS = (
    Chart(
        "cpu",
        gettext_lazy("CPU of the cluster's processes (%)"),
        "%",
        (Line("cpu_percent", title="CPU %"),),
        group="host",
    ),
    Chart(
        "memory",
        gettext_lazy("Memory of the cluster's processes"),
        "B",
        (Line("memory_bytes", title=gettext_lazy("memory (shared memory counted once)")),),
        group="host",
    ),
    Chart(
        "load",
        gettext_lazy("Load average"),
        "",
        (
            Line("load1", title=gettext_lazy("1 min")),
            Line("load5", title=gettext_lazy("5 min")),
            Line("load15", title=gettext_lazy("15 min")),
        ),
        group="host",
    ),
    Chart(
        "disk",
        gettext_lazy("Disk used (%)"),
        "%",
        (Line("disk_percent", title=gettext_lazy("disk %")),),
        max=100,
        group="host",
    ),
)


# What one point of a chart stands for, by resolution (``services.resolution_for``).
RESOLUTION_LABELS = {
    "raw": gettext_lazy("Each point is one collection."),
    "1m": gettext_lazy("Each point is a 1-minute average."),
    "5m": gettext_lazy("Each point is a 5-minute average."),
    "1h": gettext_lazy("Each point is an hourly average."),
    "4h": gettext_lazy("Each point is a 4-hour average."),
}


def pool_charts(pool: str) -> list[Chart]:
    """Per pool: its saturation (clients waiting and servers active against its size), and its
    traffic (transactions and queries per second, the longest wait)."""
    labels = metric_label("pool", pool)
    return [
        Chart(
            f"pool:{pool}",
            _("Pool %(pool)s: clients waiting and servers active against its size") % {"pool": pool},
            "",
            (
                Line("pool_cl_waiting", title=gettext_lazy("clients waiting"), labels=labels),
                Line("pool_cl_active", title=gettext_lazy("clients active"), labels=labels),
                Line("pool_sv_active", title=gettext_lazy("servers active"), labels=labels),
                Line("pool_size", title=gettext_lazy("pool size"), labels=labels, limit=True),
            ),
            group="pool",
        ),
        Chart(
            f"pool-traffic:{pool}",
            _("Pool %(pool)s: transactions and queries per second, longest wait") % {"pool": pool},
            "1/s",
            (
                Line("pool_xact_ps", title=gettext_lazy("transactions per second"), labels=labels),
                Line("pool_query_ps", title=gettext_lazy("queries per second"), labels=labels),
                Line("pool_maxwait_seconds", title=gettext_lazy("longest wait"), labels=labels, axis="y1"),
            ),
            unit2="s",
            group="pool",
        ),
    ]


def quota_charts(target: str) -> list[Chart]:
    """Per storage quota (``database:NAME`` or ``role:NAME``, written by the quotas app each
    cycle): space used against its soft and hard limits."""
    labels = metric_label("quota", target)
    kind, _sep, name = target.partition(":")
    what = _("database %(name)s") if kind == "database" else _("user %(name)s")
    return [
        Chart(
            f"quota:{target}",
            _("Storage quota of the %(what)s: space used against its limits")
            % {"what": what % {"name": name}},
            "B",
            (
                Line("quota_used_bytes", title=gettext_lazy("used"), labels=labels),
                Line("quota_soft_bytes", title=gettext_lazy("soft limit"), labels=labels, limit=True),
                Line("quota_hard_bytes", title=gettext_lazy("hard limit"), labels=labels, limit=True),
            ),
            group="quota",
        )
    ]


def _labels_seen(cluster: Cluster, metric: str, window: Window) -> set[str]:
    """The label values ``metric`` had in the window (kept after the thing is gone)."""
    since = max(timezone.now() - window.start, services.RAW_RETENTION)
    return {pair[1] for pair in map(split_label, services.labels_of(cluster, metric, since=since)) if pair}


def _quotas(cluster: Cluster, window: Window) -> list[str]:
    """The quotas the window saw (the quotas app writes their usage; a removed one's history stays)."""
    return sorted(_labels_seen(cluster, "quota_used_bytes", window))


def _pools(cluster: Cluster, window: Window) -> list[str]:
    """The cluster's pools now, and those the window saw (a deleted pool's history stays)."""
    return sorted(
        _labels_seen(cluster, "pool_size", window) | set(cluster.pools.values_list("name", flat=True))
    )


def replicates(cluster: Cluster) -> bool:
    """Whether anything streams from the cluster: standby members or read-only replicas."""
    return cluster.is_ha or cluster.replicas.exists()


def charts_for(cluster: Cluster, window: Window) -> list[Chart]:
    charts = list(DATABASE_CHARTS)
    if replicates(cluster) or _labels_seen(cluster, "replication_lag_bytes", window):
        charts.append(REPLICATION_CHART)
    if cluster.is_local:
        charts += HOST_CHARTS
        charts += [chart for pool in _pools(cluster, window) for chart in pool_charts(pool)]
        charts += [chart for target in _quotas(cluster, window) for chart in quota_charts(target)]
    return charts


SeriesKey = tuple[str, str]  # (metric, labels)


def wanted_by(charts: list[Chart]) -> list[services.Wanted]:
    """What the charts' lines read: one series by name, or every labels value of a metric."""
    return [
        (line.metric, line.labels if line.mode == "one" else None) for chart in charts for line in chart.lines
    ]


def _points(series: services.Series | None) -> dict[int, float | None]:
    return {} if series is None else {p.at: p.value for p in series.points}


def _summed(parts: list[dict[int, float | None]]) -> dict[int, float | None]:
    """Per time, the sum of the parts that have a value there; None where none has."""
    total: dict[int, float | None] = {}
    for part in parts:
        for at, value in part.items():
            if value is None:
                total.setdefault(at, None)
            else:
                total[at] = (total.get(at) or 0.0) + value
    return total


def _peaks(series: services.Series | None) -> dict[int, float | None] | None:
    """Each bucket's maximum, for lines read from rollups (None for raw points)."""
    if series is None or series.resolution == "raw":
        return None
    return {p.at: p.max for p in series.points}


def chart_data(chart: Chart, found: dict[SeriesKey, services.Series]) -> dict:
    """One chart's times (ms since the epoch, shared by its lines) and values; None breaks a line.

    A line read from rollups also carries each bucket's maximum (``max``), so a tooltip can show
    the peak an average hides (a burst of waiting clients in an hour); summed lines do not.
    ``found`` holds every line's series, read for all charts at once (``services.read_series``)."""
    Drawn = tuple[str, Line, dict[int, float | None], dict[int, float | None] | None]
    lines: list[Drawn] = []
    for line in chart.lines:
        if line.mode == "one":
            one = found.get((line.metric, line.labels))
            lines.append((str(line.title), line, _points(one), _peaks(one)))
            continue
        parts = [(labels, s) for (metric, labels), s in sorted(found.items()) if metric == line.metric]
        if line.mode == "sum":
            lines.append((str(line.title), line, _summed([_points(s) for _labels, s in parts]), None))
        else:
            for labels, part in parts:
                name = (split_label(labels) or ("", labels))[1]
                lines.append((name.replace("_", " "), line, _points(part), _peaks(part)))
    times = sorted({at for _name, _line, points, _peaks_of in lines for at in points})
    series = []
    for name, line, points, peaks in lines:
        values = [points.get(at) for at in times]
        if all(v is None for v in values):
            continue  # a series with nothing in this window: no empty legend entry
        entry: dict[str, object] = {"label": name, "values": [_round(v) for v in values]}
        if peaks is not None and not line.limit:
            entry["max"] = [_round(peaks.get(at)) for at in times]
        if line.axis != "y":
            entry["axis"] = line.axis
        if line.limit:
            entry["limit"] = True
        series.append(entry)
    return {"t": times if series else [], "series": series}


def _round(value: float | None) -> float | None:
    # Six significant digits are more than a chart shows, and keep the response small.
    return None if value is None else float(f"{value:.6g}")


def chart_page_data(cluster: Cluster, window: Window) -> dict[str, object]:
    """The JSON body of the charts' data: every chart's series over the window, a few hundred
    points a line (``services.resolution_for``)."""
    charts = charts_for(cluster, window)
    # Every line of every chart together: one query per metric, not one per line.
    found = services.read_series(cluster, wanted_by(charts), window.start, window.end)
    data = {
        chart.key: {
            **chart_data(chart, found),
            "title": str(chart.title),
            "unit": chart.unit,
            "unit2": chart.unit2,
            "group": chart.group,
        }
        for chart in charts
    }
    resolution = services.resolution_for(window.start, window.end)
    return {
        "range": window.range_key,
        "start": int(window.start.timestamp() * 1000),
        "end": int(window.end.timestamp() * 1000),
        "live": window.live,
        "resolution": resolution.name,
        "step": resolution.seconds,
        "charts": data,
    }
