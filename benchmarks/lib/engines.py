"""The registry of load generators (pure, no Django): every engine by its name.

An engine (the protocol in :mod:`benchmarks.lib.engine_base`) answers for everything that differs
per tool: its rules, warnings, argument lists, environment, the readers of its output and of its
data set's initialisation, its threads, its form fields and scripts. pgbench's and sysbench's live
in ``engine_pgbench`` and ``engine_sysbench``; a third tool is one module with such an engine that
calls :func:`register` when imported, named in the setting ``PANEL_BENCH_ENGINES`` (the benchmarks
app imports it at start, in the web and in every worker). The services, forms, commands and the
model's choices read :data:`ENGINES` and never a tool's name.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from benchmarks.lib import run_problems
from benchmarks.lib.engine_base import DatasetSpec, Engine, LaunchContext
from benchmarks.lib.engine_pgbench import PGBENCH, Pgbench
from benchmarks.lib.engine_sysbench import SYSBENCH, Sysbench
from benchmarks.lib.run_options import RunOptions, run_options
from panel.core.errors import N_, Message

__all__ = [
    "ENGINES",
    "PGBENCH",
    "SYSBENCH",
    "DatasetSpec",
    "Engine",
    "LaunchContext",
    "choices",
    "chosen_or_own",
    "engine_for",
    "extra_from_text",
    "make_options",
    "problems",
    "register",
    "unregister",
]

ENGINES: dict[str, Engine] = {}


def register(engine: Engine) -> Engine:
    """Add ``engine`` under its name (again: replaced, so a module imported twice is harmless)."""
    ENGINES[engine.name] = engine
    return engine


def unregister(name: str) -> None:
    ENGINES.pop(name, None)


register(Pgbench())
register(Sysbench())


def engine_for(name: str) -> Engine | None:
    return ENGINES.get(name)


def choices() -> list[tuple[str, str]]:
    """The engines as a model field's or a form's choices (a callable: no migration per engine)."""
    return [(name, engine.label) for name, engine in ENGINES.items()]


def chosen_or_own(name: str, field: str, chosen: object) -> object:
    """What a run form field holds for engine ``name``: what was chosen when the engine asks
    for the field, else the engine's own value (sysbench's query mode: decided at launch)."""
    engine = engine_for(name)
    if engine is None or field in engine.form_fields:
        return chosen
    return engine.form_values.get(field, chosen)


def extra_from_text(name: str, pairs: list[str]) -> tuple[tuple[str, Any], ...]:
    """``NAME=VALUE`` pairs of the command line as the engine's own fields; ValueError names the
    pair that is not one."""
    engine = engine_for(name)
    specs = {spec.name: spec for spec in engine.extra_fields} if engine is not None else {}
    values = []
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or key not in specs:
            known = ", ".join(specs) or "none"
            raise ValueError(f"{pair!r}: not NAME=VALUE with a field of {name} (its fields: {known})")
        try:
            values.append((key, specs[key].parse(raw)))
        except ValueError as exc:
            raise ValueError(f"{key}: {exc}") from None
    return tuple(values)


def unknown(name: str) -> Message:
    return Message(
        N_("Unknown engine %(e)s: choose one of %(names)s."),
        "run.engine_unknown",
        e=repr(name),
        names=", ".join(ENGINES),
    )


def problems(options: RunOptions) -> list[tuple[str, Message]]:
    """Blocking errors of a run by its engine's rules; an unknown engine is one of them."""
    engine = engine_for(options.engine)
    if engine is not None:
        return engine.problems(options)
    return [*run_problems.problems(options), ("engine", unknown(options.engine))]


def make_options(*, engine: str = PGBENCH, cpu_count: int | None = None, **chosen: object) -> RunOptions:
    """A run as a user chose it (the form, ``bench run``): its threads as its engine says (no
    threads given: one per CPU for pgbench; sysbench's are its clients)."""
    options = run_options(engine=engine, cpu_count=cpu_count, **chosen)  # type: ignore[arg-type]
    tool = engine_for(engine)
    if tool is None:
        return options
    asked = chosen.get("threads")
    cpus = cpu_count if cpu_count is not None else os.cpu_count()
    return replace(
        options, threads=tool.threads_for(options.clients, cpus, asked if isinstance(asked, int) else None)
    )
