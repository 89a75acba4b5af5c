"""Forms of the Benchmarks tab. They check the shape of the input and build the domain types
(``RunOptions``, the pool) the way ``manage.py bench run`` does; the services check the rules
(the target exists, pgbench accepts the options and the custom script)."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from benchmarks.lib import engines
from benchmarks.lib import pgbench_command as cmd
from benchmarks.lib import sysbench_command as sb
from benchmarks.models import SweepKind
from benchmarks.services.sweeps import check_pool_sizes
from panel.clusters.models import Cluster
from panel.core.errors import ServiceError
from panel.core.forms import PanelForm
from panel.pools.models import ConnectionPool

DIRECT = "direct"
CUSTOM = "custom"
SCRIPT_CHOICES = [
    ("tpcb-like", _("TPC-B-like (read/write, the default)")),
    ("simple-update", _("Simple update")),
    ("select-only", _("Select only")),
]
SYSBENCH_SCRIPT_CHOICES = [
    ("oltp_read_write", _("OLTP read/write")),
    ("oltp_read_only", _("OLTP read only")),
    ("oltp_point_select", _("OLTP point select")),
    ("oltp_write_only", _("OLTP write only")),
]
ENGINE_CHOICES = [("pgbench", "pgbench"), ("sysbench", "sysbench")]
QUERY_MODE_CHOICES = [
    ("simple", _("Simple")),
    ("extended", _("Extended")),
    ("prepared", _("Prepared")),
]
MAX_SWEEP_POINTS = 20


def _target_choices(cluster: Cluster) -> list[tuple[str, str]]:
    choices = [(DIRECT, str(_("The cluster directly")))]
    choices += [
        (str(pool.pk), str(_("Pool %(name)s (%(mode)s, %(size)s)")) % {
            "name": pool.name, "mode": pool.mode, "size": pool.size,
        })
        for pool in cluster.pools.all()
    ]  # fmt: skip
    return choices


def _database_choices(field: forms.Field, cluster: Cluster, fallback: str | None) -> None:
    """The cluster's databases; ``benchmark`` (the tutorial's) preselected when it exists."""
    names = [database.name for database in cluster.databases.all()]
    field.choices = [(name, name) for name in names]
    field.initial = "benchmark" if "benchmark" in names else fallback


def _engine(value: str | None) -> str:
    return value or sb.PGBENCH  # forms posted before the engine existed: pgbench


class InitDataSetForm(PanelForm):
    """``pgbench -i`` (database, scale factor, optional steps and foreign keys) or ``sysbench
    prepare`` (database, tables, rows per table)."""

    database = forms.ChoiceField(label=_("Database"))
    engine = forms.ChoiceField(
        label=_("Engine"),
        choices=ENGINE_CHOICES,
        required=False,
        initial=sb.PGBENCH,
        help_text=_("Each tool runs on tables of its own: pgbench_* or sysbench's sbtest1…N."),
    )
    scale = forms.IntegerField(
        label=_("Scale factor"),
        min_value=1,
        max_value=cmd.MAX_SCALE,
        initial=10,
        required=False,
        help_text=_("100,000 accounts per unit (about 15 MB). Use at least as many as your clients."),
    )
    tables = forms.IntegerField(
        label=_("Tables"), min_value=1, max_value=sb.MAX_TABLES, initial=sb.DEFAULT_TABLES, required=False
    )
    table_size = forms.IntegerField(
        label=_("Rows per table"),
        min_value=1,
        max_value=sb.MAX_TABLE_SIZE,
        initial=sb.DEFAULT_TABLE_SIZE,
        required=False,
        help_text=_("sysbench prepare --tables --table-size (100,000 rows are about 24 MB)."),
    )
    init_steps = forms.CharField(
        label=_("Init steps"),
        required=False,
        max_length=16,
        help_text=_("Optional, pgbench's -I letters (default dtgvp)."),
    )
    foreign_keys = forms.BooleanField(label=_("Create foreign keys"), required=False)

    def __init__(self, *args: Any, cluster: Cluster, **kwargs: Any) -> None:
        # The three forms share one page and field names: distinct ids keep each label on its field.
        kwargs.setdefault("auto_id", "init-%s")
        super().__init__(*args, **kwargs)
        _database_choices(self.fields["database"], cluster, None)
        self.fields["foreign_keys"].widget.attrs["class"] = "form-check-input"
        self.fields["init_steps"].widget.attrs.update({"spellcheck": "false", "autocomplete": "off"})

    def clean_engine(self) -> str:
        return _engine(self.cleaned_data.get("engine"))

    def clean_init_steps(self) -> str | None:
        return self.cleaned_data["init_steps"].strip() or None

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("engine") == sb.PGBENCH and "scale" not in self.errors and data.get("scale") is None:
            self.add_error("scale", _("Give a scale factor."))
        return data

    def service_kwargs(self) -> dict[str, Any]:
        """What ``services.init_dataset`` takes from this form."""
        data = self.cleaned_data
        return {
            "database": data["database"],
            "scale": data.get("scale"),
            "init_steps": data.get("init_steps"),
            "foreign_keys": bool(data.get("foreign_keys")),
            "engine": data["engine"],
            "tables": data.get("tables"),
            "table_size": data.get("table_size"),
        }


class _TargetMixin:
    cluster: Cluster
    fields: dict[str, forms.Field]

    def _pool_for(self, value: str) -> ConnectionPool | None:
        if value == DIRECT:
            return None
        pool = self.cluster.pools.filter(pk=value).first()
        if pool is None:
            raise forms.ValidationError(_("This pool no longer exists."), code="gone")
        return pool


class RunForm(_TargetMixin, PanelForm):
    """One pgbench or sysbench run, mirroring ``manage.py bench run``."""

    engine = forms.ChoiceField(
        label=_("Engine"),
        choices=ENGINE_CHOICES,
        required=False,
        initial=sb.PGBENCH,
        # What sysbench needs (its data set, no prepared statements through a transaction pool) is
        # said under the script, where the page shows it only for sysbench.
    )
    target = forms.ChoiceField(label=_("Target"))
    database = forms.ChoiceField(
        label=_("Database"), required=False, help_text=_("A pool implies its own database.")
    )
    user = forms.ChoiceField(label=_("User"), required=False)
    clients = forms.IntegerField(
        label=_("Clients"),
        min_value=1,
        max_value=cmd.MAX_CLIENTS,
        initial=10,
        help_text=_("How many database sessions pgbench opens at once (pgbench's -c)."),
    )
    threads = forms.IntegerField(
        label=_("Threads"),
        min_value=1,
        required=False,
        help_text=_("How many threads drive the clients (-j); empty: one per CPU, at most the clients."),
    )
    duration = forms.IntegerField(
        label=_("Duration (s)"), min_value=1, max_value=cmd.MAX_DURATION_S, required=False, initial=30
    )
    transactions = forms.IntegerField(
        label=_("Transactions per client"), min_value=1, max_value=1_000_000_000, required=False
    )
    progress = forms.IntegerField(
        label=_("Progress interval (s)"), min_value=1, max_value=cmd.MAX_PROGRESS_S, initial=1
    )
    script = forms.ChoiceField(
        label=_("Script"),
        choices=[
            ("pgbench", [*SCRIPT_CHOICES, (CUSTOM, _("Custom script"))]),
            ("sysbench", SYSBENCH_SCRIPT_CHOICES),
        ],
        initial="tpcb-like",
    )
    custom_script = forms.CharField(
        label=_("Custom script"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 5, "spellcheck": "false"}),
        help_text=_(
            "SQL with pgbench meta-commands (\\set, \\sleep …), checked by pgbench's own parser. "
            "\\shell and \\setshell are not allowed."
        ),
    )
    query_mode = forms.ChoiceField(label=_("Query mode"), choices=QUERY_MODE_CHOICES, initial="simple")
    rate = forms.FloatField(
        label=_("Rate (tx/s)"), required=False, min_value=0.001, help_text=_("Optional, --rate.")
    )
    latency_limit = forms.FloatField(
        label=_("Latency limit (ms)"), required=False, min_value=0.001, help_text=_("Optional.")
    )
    connect = forms.BooleanField(
        label=_("Web app without a pool: a new connection per transaction (-C)"),
        required=False,
        help_text=_(
            "Each transaction opens its own connection, as a web app without a pool does: where a "
            "pool wins most. Compare it direct and through a pool."
        ),
    )
    max_tries = forms.IntegerField(
        label=_("Max tries"), required=False, min_value=0, help_text=_("Optional; 0 is unlimited.")
    )
    percentiles = forms.BooleanField(
        label=_("Latency percentiles (p50, p95, p99)"), required=False, initial=True
    )
    label = forms.CharField(label=_("Label"), required=False, max_length=100)

    def __init__(self, *args: Any, cluster: Cluster, **kwargs: Any) -> None:
        # The three forms share one page and field names: distinct ids keep each label on its field.
        kwargs.setdefault("auto_id", "run-%s")
        super().__init__(*args, **kwargs)
        self.cluster = cluster
        self.fields["target"].choices = _target_choices(cluster)
        _database_choices(self.fields["database"], cluster, cluster.default_database)
        self.fields["user"].choices = [("", _("Default (%(u)s)") % {"u": cluster.admin_user})] + [
            (u.name, u.name) for u in cluster.users.all()
        ]
        for name in ("connect", "percentiles"):
            self.fields[name].widget.attrs["class"] = "form-check-input"
        for name in ("clients", "threads", "duration", "transactions", "progress", "max_tries"):
            self.fields[name].widget.attrs["inputmode"] = "numeric"

    def clean_target(self) -> ConnectionPool | None:
        return self._pool_for(self.cleaned_data["target"])

    def clean_engine(self) -> str:
        return _engine(self.cleaned_data.get("engine"))

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("engine") == sb.SYSBENCH:
            # pgbench's choices the page hides for sysbench: not the user's, so not an error.
            data["query_mode"] = "auto"
            data["percentiles"] = False
            return self._clean_rules(data)
        if data.get("script") == CUSTOM and not (data.get("custom_script") or "").strip():
            self.add_error("custom_script", _("Write the custom script, or choose a built-in one."))
        return self._clean_rules(data)

    def _clean_rules(self, data: dict[str, Any]) -> dict[str, Any]:
        if not self.errors:
            # The rules between fields (threads and clients, duration or transactions…) are the
            # library's, the same the services and ``bench run`` apply. A sysbench run's tables
            # come from its data set, checked by the service.
            for field, message in engines.problems(self.options()):
                if field in ("tables", "table_size"):
                    continue
                self.add_error(field if field in self.fields else None, str(message))
        return data

    @property
    def pool(self) -> ConnectionPool | None:
        return self.cleaned_data.get("target")

    @property
    def fixed_pool_users(self) -> str:
        """``{pool id: user}`` as JSON for the pools that always log in as one user: the page
        disables the User select for them and shows that user (the services refuse another)."""
        pools = self.cluster.pools.order_by("name")
        return json.dumps({str(pool.pk): pool.user for pool in pools if not pool.is_inbound_user})

    @property
    def custom_script_text(self) -> str | None:
        if self.cleaned_data.get("script") != CUSTOM or self.cleaned_data.get("engine") == sb.SYSBENCH:
            return None
        return self.cleaned_data["custom_script"]

    def options(self) -> cmd.RunOptions:
        data = self.cleaned_data
        return cmd.run_options(
            clients=data["clients"],
            threads=data.get("threads"),
            duration_s=data.get("duration"),
            transactions=data.get("transactions"),
            progress_interval_s=data["progress"],
            builtin=None if data["script"] == CUSTOM else data["script"],
            query_mode=data["query_mode"],
            rate=data.get("rate"),
            latency_limit_ms=data.get("latency_limit"),
            connect_per_transaction=bool(data.get("connect")),
            max_tries=data.get("max_tries"),
            engine=data.get("engine") or sb.PGBENCH,
        )

    def service_kwargs(self) -> dict[str, Any]:
        """What ``services.launch_run`` and ``services.preview_warnings`` take from this form."""
        data = self.cleaned_data
        pool = self.pool
        return {
            "pool": pool,
            "database": None if pool else (data.get("database") or None),
            "user": data.get("user") or None,
            "options": self.options(),
            "custom_script": self.custom_script_text,
        }


def parse_clients_list(text: str) -> list[int]:
    """``"10, 50,100 150"`` → ``[10, 50, 100, 150]`` (sorted, no duplicates)."""
    words = text.replace(",", " ").split()
    if not words:
        raise forms.ValidationError(_("Give at least one client count, e.g. 10,50,100,150."))
    try:
        counts = sorted({int(word) for word in words})
    except ValueError:
        raise forms.ValidationError(_("Client counts are whole numbers separated by commas.")) from None
    if counts[0] < 1 or counts[-1] > cmd.MAX_CLIENTS:
        raise forms.ValidationError(
            _("Client counts must be between 1 and %(max)s.") % {"max": cmd.MAX_CLIENTS}
        )
    if len(counts) > MAX_SWEEP_POINTS:
        raise forms.ValidationError(_("At most %(n)s client counts.") % {"n": MAX_SWEEP_POINTS})
    return counts


def parse_pool_sizes(text: str) -> list[int]:
    """``"2, 5,10 20"`` → ``[2, 5, 10, 20]`` (sorted, no duplicates)."""
    try:
        sizes = sorted({int(word) for word in text.replace(",", " ").split()})
    except ValueError:
        raise forms.ValidationError(_("Pool sizes are whole numbers separated by commas.")) from None
    if not sizes:
        raise forms.ValidationError(_("Give at least one pool size, e.g. 2,5,10,20."))
    if sizes[0] < 1:
        raise forms.ValidationError(_("Pool sizes must be at least 1."))
    return sizes


SCRATCH = ""
SWEEP_KIND_CHOICES = [
    (SweepKind.TARGETS, _("Clients × targets: direct against pools")),
    (SweepKind.POOL_SIZES, _("Clients × pool sizes: one pool, resized between steps")),
]


class SweepForm(_TargetMixin, PanelForm):
    """A plan of runs: client counts × targets, or × sizes of one pool, × repeats, one after the other."""

    name = forms.CharField(label=_("Name"), required=False, max_length=100)
    kind = forms.ChoiceField(
        label=_("Sweep"), choices=SWEEP_KIND_CHOICES, initial=SweepKind.TARGETS, required=False,
        widget=forms.RadioSelect,
    )  # fmt: skip
    clients_list = forms.CharField(
        label=_("Client counts"), initial="10,50,100,150", help_text=_("Separated by commas.")
    )
    targets = forms.MultipleChoiceField(
        label=_("Targets"), widget=forms.CheckboxSelectMultiple, initial=[DIRECT], required=False
    )
    pool = forms.ChoiceField(label=_("Pool to resize"), required=False)
    pool_sizes = forms.CharField(
        label=_("Pool sizes"),
        required=False,
        initial="2,5,10,20",
        help_text=_(
            "Separated by commas. The pool is resized online (PgBouncer reload) before each size's "
            "runs and gets its size back when the sweep ends."
        ),
    )
    database = forms.ChoiceField(
        label=_("Database"), help_text=_("Of the direct runs, and of a scratch pool.")
    )
    repeats = forms.IntegerField(
        label=_("Repeats"), min_value=1, max_value=20, initial=1, help_text=_("Each cell shows their median.")
    )
    duration = forms.IntegerField(
        label=_("Duration of each run (s)"), min_value=1, max_value=cmd.MAX_DURATION_S, initial=30
    )
    engine = forms.ChoiceField(label=_("Engine"), choices=ENGINE_CHOICES, required=False, initial=sb.PGBENCH)
    script = forms.ChoiceField(
        label=_("Script"),
        choices=[("pgbench", SCRIPT_CHOICES), ("sysbench", SYSBENCH_SCRIPT_CHOICES)],
        initial="tpcb-like",
    )
    query_mode = forms.ChoiceField(label=_("Query mode"), choices=QUERY_MODE_CHOICES, initial="simple")
    connect = forms.BooleanField(
        label=_("Web app without a pool: a new connection per transaction (-C)"), required=False
    )

    def __init__(self, *args: Any, cluster: Cluster, **kwargs: Any) -> None:
        # The three forms share one page and field names: distinct ids keep each label on its field.
        kwargs.setdefault("auto_id", "sweep-%s")
        super().__init__(*args, **kwargs)
        self.cluster = cluster
        self.fields["targets"].choices = _target_choices(cluster)
        self.fields["pool"].choices = [
            (SCRATCH, str(_("A scratch transaction pool for this sweep (removed after)")))
        ] + _target_choices(cluster)[1:]
        _database_choices(self.fields["database"], cluster, cluster.default_database)
        for name in ("connect", "kind"):
            self.fields[name].widget.attrs["class"] = "form-check-input"

    def clean_kind(self) -> str:
        return self.cleaned_data.get("kind") or SweepKind.TARGETS

    def clean_engine(self) -> str:
        return _engine(self.cleaned_data.get("engine"))

    def clean_clients_list(self) -> list[int]:
        return parse_clients_list(self.cleaned_data["clients_list"])

    def clean_targets(self) -> list[ConnectionPool | None]:
        return [self._pool_for(value) for value in self.cleaned_data["targets"]]

    def clean_pool(self) -> ConnectionPool | None:
        value = self.cleaned_data.get("pool") or SCRATCH
        return None if value == SCRATCH else self._pool_for(value)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("kind") == SweepKind.POOL_SIZES:
            self._clean_pool_sizes(data)
        elif "targets" not in self.errors and not data.get("targets"):
            self.add_error("targets", _("Choose at least one target."))
        engine = data.get("engine")
        script = data.get("script")
        scripts = sb.SYSBENCH_SCRIPTS if engine == sb.SYSBENCH else dict(SCRIPT_CHOICES)
        if script and script not in scripts:
            self.add_error("script", _("Choose one of %(engine)s's scripts.") % {"engine": engine})
        if engine == sb.SYSBENCH:
            # pgbench's choices the page hides for sysbench: not the user's, so not an error. The
            # service turns prepared statements off through transaction pools (--db-ps-mode=disable).
            data["query_mode"] = "auto"
            data["connect"] = False
        return data

    def _clean_pool_sizes(self, data: dict[str, Any]) -> None:
        try:
            sizes = parse_pool_sizes(data.get("pool_sizes") or "")
        except forms.ValidationError as exc:
            self.add_error("pool_sizes", exc)
            return
        data["pool_sizes"] = sizes
        if "pool" in self.errors:
            return
        try:  # the service's budget rule, beside the field rather than on top of the form
            check_pool_sizes(self.cluster, sizes, data.get("pool"))
        except ServiceError as exc:
            self.add_error("pool_sizes", exc.message)

    def base_options(self) -> cmd.RunOptions:
        data = self.cleaned_data
        return cmd.run_options(
            clients=1,
            threads=1,
            duration_s=data["duration"],
            builtin=data["script"],
            query_mode=data["query_mode"],
            connect_per_transaction=bool(data.get("connect")),
            engine=data["engine"],
        )

    def service_kwargs(self) -> dict[str, Any]:
        """What ``services.launch_sweep`` takes from this form."""
        data = self.cleaned_data
        common = {
            "clients_list": data["clients_list"],
            "repeats": data["repeats"],
            "base_options": self.base_options(),
            "name": data["name"],
        }
        if data["kind"] == SweepKind.POOL_SIZES:
            pool = data.get("pool")
            # A picked pool implies its own database; a scratch pool is made on the chosen one.
            database = None if pool else data["database"]
            return {**common, "pool_sizes": data["pool_sizes"], "pool": pool, "database": database}
        # The database field is for direct runs; a pool implies its own.
        pools_only = all(pool is not None for pool in data["targets"])
        return {**common, "pools": data["targets"], "database": None if pools_only else data["database"]}
