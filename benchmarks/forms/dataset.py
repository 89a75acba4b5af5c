"""The data set form: initialise pgbench's tables or prepare sysbench's."""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from benchmarks.forms.common import (
    EngineFieldsMixin,
    database_choices,
    engine_name,
)
from benchmarks.lib import engines
from benchmarks.lib import pgbench_command as cmd
from benchmarks.lib import sysbench_command as sb
from panel.clusters.models import Cluster
from panel.core.forms import PanelForm


class InitDataSetForm(EngineFieldsMixin, PanelForm):
    """``pgbench -i`` (database, scale factor, optional steps and foreign keys) or ``sysbench
    prepare`` (database, tables, rows per table)."""

    database = forms.ChoiceField(label=_("Database"))
    engine = forms.ChoiceField(
        label=_("Engine"),
        required=False,
        initial=engines.PGBENCH,
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

    engine_fields_attr = "dataset_fields"
    id_prefix = "init"
    engine_specific = ("scale", "init_steps", "foreign_keys", "tables", "table_size")

    def __init__(self, *args: Any, cluster: Cluster, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        database_choices(self.fields["database"], cluster, None)
        self.fields["foreign_keys"].widget.attrs["class"] = "form-check-input"
        self.fields["init_steps"].widget.attrs.update({"spellcheck": "false", "autocomplete": "off"})

    def clean_engine(self) -> str:
        return engine_name(self.cleaned_data.get("engine"))

    def clean_init_steps(self) -> str | None:
        return self.cleaned_data["init_steps"].strip() or None

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        engine = engines.engine_for(data.get("engine") or engines.PGBENCH)
        if engine is not None and not self.errors:
            # The engine's word on its data set's fields, beside the field (the service applies it too).
            spec = engines.DatasetSpec(
                data.get("scale"),
                data.get("init_steps"),
                bool(data.get("foreign_keys")),
                data.get("tables"),
                data.get("table_size"),
            )
            for field, message in engine.dataset_spec(spec)[1]:
                self.add_error(field if field in self.fields else None, str(message))
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
