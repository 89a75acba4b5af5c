"""The run form: a benchmark run as the user chose it, made into ``RunOptions`` and a target."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from benchmarks.forms.common import (
    CUSTOM,
    QUERY_MODE_CHOICES,
    EngineFieldsMixin,
    TargetMixin,
    database_choices,
    engine_name,
    extra_field_name,
    script_choices,
    target_choices,
)
from benchmarks.lib import engines
from benchmarks.lib import pgbench_command as cmd
from panel.clusters.models import Cluster
from panel.core.forms import PanelForm
from panel.pools.models import ConnectionPool


class RunForm(EngineFieldsMixin, TargetMixin, PanelForm):
    """One run of any engine, mirroring ``manage.py bench run``. The engine and script choices
    are the registry's; the fields an engine does not ask for (``Engine.form_fields``) are hidden
    on the page and take the engine's own values (``Engine.form_values``)."""

    engine = forms.ChoiceField(
        label=_("Engine"),
        required=False,
        initial=engines.PGBENCH,
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
    script = forms.ChoiceField(label=_("Script"), initial="tpcb-like")
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

    engine_specific = ("threads", "query_mode", "latency_limit", "max_tries", "percentiles", "connect")

    def __init__(self, *args: Any, cluster: Cluster, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cluster = cluster
        self.fields["script"].choices = script_choices(custom=True)
        self.add_engine_fields()
        self.fields["target"].choices = target_choices(cluster)
        database_choices(self.fields["database"], cluster, cluster.default_database)
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
        return engine_name(self.cleaned_data.get("engine"))

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        engine = engines.engine_for(data.get("engine") or engines.PGBENCH)
        if engine is not None:
            # The choices the page hides for this engine and fills itself: not the user's, so not
            # an error. A value the user gave to another engine's field is the engine's rules' to
            # refuse, beside that field.
            for field, value in engine.form_values.items():
                if field not in engine.form_fields:
                    data[field] = value
                    self.errors.pop(field, None)
        data["extra"] = self.engine_extra(data)
        if engine is not None and engine.custom_script_refusal() is not None:
            return self._clean_rules(data)
        if data.get("script") == CUSTOM and not (data.get("custom_script") or "").strip():
            self.add_error("custom_script", _("Write the custom script, or choose a built-in one."))
        return self._clean_rules(data)

    def _clean_rules(self, data: dict[str, Any]) -> dict[str, Any]:
        if not self.errors:
            # The rules between fields (threads and clients, duration or transactions…) are the
            # library's, the same the services and ``bench run`` apply. A sysbench run's tables
            # come from its data set, checked by the service.
            options = self.options()
            for field, message in engines.problems(options):
                if field in ("tables", "table_size"):
                    continue
                own = extra_field_name(options.engine, field)  # an engine's own field
                name = field if field in self.fields else own if own in self.fields else None
                self.add_error(name, str(message))
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
        if self.cleaned_data.get("script") != CUSTOM:
            return None
        return self.cleaned_data["custom_script"]

    def options(self) -> cmd.RunOptions:
        data = self.cleaned_data
        return engines.make_options(
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
            engine=data.get("engine") or engines.PGBENCH,
            extra=data.get("extra", ()),
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
