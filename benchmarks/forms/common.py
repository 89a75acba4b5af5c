"""What the Benchmarks tab's forms share: the choices of target, database, engine and script
(engines and scripts from the registry of engines)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from benchmarks.lib import engines
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


def database_choices(field: forms.Field, cluster: Cluster, fallback: str | None) -> None:
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
    fields: dict[str, forms.Field]

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
    fields: dict[str, forms.Field]

    def _pool_for(self, value: str) -> ConnectionPool | None:
        if value == DIRECT:
            return None
        pool = self.cluster.pools.filter(pk=value).first()
        if pool is None:
            raise forms.ValidationError(_("This pool no longer exists."), code="gone")
        return pool
