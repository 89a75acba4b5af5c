"""What the Benchmarks tab's forms share: the choices of target, database, engine and script
(engines and scripts from the registry of engines)."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.utils.translation import gettext_lazy as _

from benchmarks.lib import engines
from benchmarks.lib.engine_base import FieldSpec
from panel.clusters.models import Cluster
from panel.pools.models import ConnectionPool

DIRECT = "direct"
CUSTOM = "custom"


def engine_choices() -> list[tuple[str, str]]:
    """One choice per registered engine (benchmarks/lib/engines.py): a new engine shows up by itself."""
    return engines.choices()


def script_choices(*, custom: bool) -> list[tuple[str, list[tuple[str, Any]]]]:
    """Each engine's built-in scripts in a group of their own, and "Custom script" for an engine
    that takes one (``custom``: the run form, not a sweep's)."""
    groups = []
    for name, engine in engines.ENGINES.items():
        scripts: list[tuple[str, Any]] = [(script, _(label)) for script, label in engine.scripts.items()]
        if custom and engine.custom_script_refusal() is None:
            scripts.append((CUSTOM, _("Custom script")))
        groups.append((name, scripts))
    return groups


def form_field(spec: FieldSpec) -> forms.Field:
    """The Django field of an engine's own field; required is checked only for its engine."""
    common: dict[str, Any] = {
        "label": _(spec.label),
        "required": False,
        "initial": spec.initial,
        "help_text": _(spec.help) if spec.help else "",
    }
    if spec.kind == "int":
        low, high = cast("int | None", spec.min_value), cast("int | None", spec.max_value)  # ints here
        return forms.IntegerField(min_value=low, max_value=high, **common)
    if spec.kind == "float":
        return forms.FloatField(min_value=spec.min_value, max_value=spec.max_value, **common)
    if spec.kind == "bool":
        return forms.BooleanField(**common)
    if spec.kind == "choice":
        return forms.ChoiceField(choices=[(value, _(label)) for value, label in spec.choices], **common)
    return forms.CharField(max_length=200, **common)


def extra_field_name(engine: str, field: str) -> str:
    return f"{engine}_{field}"


def scripts_of(engine: str) -> frozenset[str]:
    tool = engines.engine_for(engine)
    return frozenset(tool.scripts) if tool is not None else frozenset()


QUERY_MODE_CHOICES = [
    ("simple", _("Simple")),
    ("extended", _("Extended")),
    ("prepared", _("Prepared")),
]
MAX_SWEEP_POINTS = 20


def target_choices(cluster: Cluster) -> list[tuple[str, str]]:
    choices = [(DIRECT, str(_("The cluster directly")))]
    choices += [
        (str(pool.pk), str(_("Pool %(name)s (%(mode)s, %(size)s)")) % {
            "name": pool.name, "mode": pool.mode, "size": pool.size,
        })
        for pool in cluster.pools.all()
    ]  # fmt: skip
    return choices


def database_choices(field: forms.ChoiceField, cluster: Cluster, fallback: str | None) -> None:
    """The cluster's databases; ``benchmark`` (the tutorial's) preselected when it exists."""
    names = [database.name for database in cluster.databases.all()]
    field.choices = [(name, name) for name in names]
    field.initial = "benchmark" if "benchmark" in names else fallback


def engine_name(value: str | None) -> str:
    return value or engines.PGBENCH  # forms posted before the engine existed: pgbench


class EngineFieldsMixin:
    """What the page needs to show each engine its own fields: which engines ask for a field
    (``data-bench-engine``, read by bench-form.js) and which fields the chosen one hides now."""

    #: The engine attribute naming the fields it asks for: ``form_fields`` or ``dataset_fields``.
    engine_fields_attr = "form_fields"
    #: The fields only some engines ask for; the others are every engine's.
    engine_specific: tuple[str, ...] = ()
    #: The engine attribute of the note shown under the script: ``run_note`` or ``sweep_note``.
    note_attr = "run_note"
    #: The start of the form's element ids: the three forms share one page and field names, and
    #: distinct ids keep each label on its field.
    id_prefix = "run"
    fields: dict[str, Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("auto_id", f"{self.id_prefix}-%s")
        super().__init__(*args, **kwargs)
        self.fields["engine"].choices = engine_choices()

    def _chosen(self) -> str:
        return engine_name(self["engine"].value())  # type: ignore[index]

    def _asked_by(self, field: str) -> list[str]:
        return [name for name, e in engines.ENGINES.items() if field in getattr(e, self.engine_fields_attr)]

    @property
    def asking(self) -> dict[str, str]:
        """Field → the names of the engines that ask for it, space-separated."""
        return {field: " ".join(self._asked_by(field)) for field in self.engine_specific}

    @property
    def hidden_now(self) -> frozenset[str]:
        chosen = self._chosen()
        return frozenset(field for field in self.engine_specific if chosen not in self._asked_by(field))

    def add_engine_fields(self) -> None:
        """Every engine's own fields (``Engine.extra_fields``), named after the engine."""
        for name, engine in engines.ENGINES.items():
            for spec in engine.extra_fields:
                self.fields[extra_field_name(name, spec.name)] = form_field(spec)

    @property
    def engine_extra_fields(self) -> list[tuple[str, Any, bool]]:
        """(engine, its bound field, shown now) for the run form's page."""
        chosen = self._chosen()
        return [
            (name, self[extra_field_name(name, spec.name)], name == chosen)  # type: ignore[index]
            for name, engine in engines.ENGINES.items()
            for spec in engine.extra_fields
        ]

    def engine_extra(self, data: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
        """The chosen engine's own values, and "required" beside the field that lacks one."""
        engine = engines.engine_for(data.get("engine") or engines.PGBENCH)
        values = []
        for spec in engine.extra_fields if engine is not None else ():
            field = extra_field_name(engine.name, spec.name)  # type: ignore[union-attr]
            value = data.get(field)
            if value is None or value == "":
                if spec.required and field not in self.errors:  # type: ignore[attr-defined]
                    # Django's own words (its catalogue has them in every language).
                    self.add_error(field, self.fields[field].error_messages["required"])  # type: ignore[attr-defined]
                continue
            values.append((spec.name, value))
        return tuple(values)

    @property
    def engine_notes(self) -> list[tuple[str, Any, bool]]:
        """(engine, its note under the script, shown now) for each engine that has one."""
        chosen = self._chosen()
        return [
            (name, _(note), name == chosen)
            for name, engine in engines.ENGINES.items()
            if (note := getattr(engine, self.note_attr, None))
        ]


class TargetMixin:
    cluster: Cluster
    fields: dict[str, Any]

    def _pool_for(self, value: str) -> ConnectionPool | None:
        if value == DIRECT:
            return None
        pool = self.cluster.pools.filter(pk=value).first()
        if pool is None:
            raise forms.ValidationError(_("This pool no longer exists."), code="gone")
        return pool
