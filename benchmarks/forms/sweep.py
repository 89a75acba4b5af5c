"""The sweep form: client counts × targets, or × pool sizes, with repeats."""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from benchmarks.forms.common import (
    DIRECT,
    MAX_SWEEP_POINTS,
    QUERY_MODE_CHOICES,
    EngineFieldsMixin,
    TargetMixin,
    database_choices,
    engine_name,
    script_choices,
    target_choices,
)
from benchmarks.lib import engines
from benchmarks.lib import pgbench_command as cmd
from benchmarks.models import SweepKind
from benchmarks.services.sweeps import check_pool_sizes
from panel.clusters.models import Cluster
from panel.core.errors import ServiceError
from panel.core.forms import PanelForm
from panel.pools.models import ConnectionPool


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


class SweepForm(EngineFieldsMixin, TargetMixin, PanelForm):
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
    engine = forms.ChoiceField(label=_("Engine"), required=False, initial=engines.PGBENCH)
    script = forms.ChoiceField(label=_("Script"), initial="tpcb-like")
    query_mode = forms.ChoiceField(label=_("Query mode"), choices=QUERY_MODE_CHOICES, initial="simple")
    connect = forms.BooleanField(
        label=_("Web app without a pool: a new connection per transaction (-C)"), required=False
    )

    engine_specific = ("query_mode", "connect")
    note_attr = "sweep_note"
    id_prefix = "sweep"

    def __init__(self, *args: Any, cluster: Cluster, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cluster = cluster
        self.fields["script"].choices = script_choices(custom=False)
        self.fields["targets"].choices = target_choices(cluster)
        self.fields["pool"].choices = [
            (SCRATCH, str(_("A scratch transaction pool for this sweep (removed after)")))
        ] + target_choices(cluster)[1:]
        database_choices(self.fields["database"], cluster, cluster.default_database)
        for name in ("connect", "kind"):
            self.fields[name].widget.attrs["class"] = "form-check-input"

    def clean_kind(self) -> str:
        return self.cleaned_data.get("kind") or SweepKind.TARGETS

    def clean_engine(self) -> str:
        return engine_name(self.cleaned_data.get("engine"))

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
        engine = engines.engine_for(data.get("engine") or engines.PGBENCH)
        script = data.get("script")
        if engine is not None and script and script not in engine.scripts:
            self.add_error("script", _("Choose one of %(engine)s's scripts.") % {"engine": engine.name})
        if engine is not None:
            # The choices the page hides for this engine: not the user's, so not an error (sysbench:
            # the service turns prepared statements off through transaction pools).
            hidden = {"query_mode": engine.form_values.get("query_mode", "simple"), "connect": False}
            for field, value in hidden.items():
                if field not in engine.form_fields:
                    data[field] = value
                    self.errors.pop(field, None)
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
        return engines.make_options(
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
