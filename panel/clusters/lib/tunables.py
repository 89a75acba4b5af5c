"""The PostgreSQL settings a cluster's owner may change: a safe subset (pure, no Django).

Each setting here applies with a reload (no restart) and stays inside the cluster: it is about
one session's memory, timeouts, logging or the clock, never about files, libraries, connections
or roles, so no value can reach past the cluster's own processes (which its cgroup bounds anyway).
The names and types are those of the managed service's PostgreSQL advanced configuration (its
``GET``/``PATCH /v2/databases/{id}/config``); ``statement_timeout`` is the panel's own addition.

    work_mem                             integer, MB   1 … 1024                        default 4
    statement_timeout                    integer, ms   0 … 604800000 (0: none)          default 0
    idle_in_transaction_session_timeout  integer, ms   0 … 604800000 (0: none)          default 0
    log_min_duration_statement           integer, ms   -1 … 86400000 (-1: off)          default -1
    deadlock_timeout                     integer, ms   500 … 1800000                    default 1000
    autovacuum_naptime                   integer, s    1 … 86400                        default 60
    temp_file_limit                      integer, kB   -1 … 2147483647 (-1: no limit)   default -1
    jit                                  boolean                                        default true
    track_io_timing                      "on" | "off"                                   default "off"
    timezone                             an IANA time zone name                         default "UTC"
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from panel.core.errors import N_, Message

Value = int | bool | str


@dataclass(frozen=True)
class Tunable:
    """One setting: its type (``int``, ``bool``, ``choice`` or ``timezone``), unit and range."""

    name: str
    kind: str
    default: Value
    unit: str = ""
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] = ()
    # PostgreSQL keeps the value in pg_settings in its own base unit: this many of them per ours.
    base_per_unit: int = 1
    # Marked for the catalogue (N_), translated where a page shows it (the reader's language).
    help: str = ""

    @property
    def range_text(self) -> str:
        if self.kind == "int":
            return f"{self.minimum} … {self.maximum}" + (f" {self.unit}" if self.unit else "")
        if self.kind == "choice":
            return " | ".join(self.choices)
        if self.kind == "bool":
            return "true | false"
        return N_("IANA time zone name")

    def rendered(self, value: Value) -> str:
        """The value as postgresql.conf takes it (in PostgreSQL's base unit, strings quoted)."""
        if self.kind == "int":
            return str(int(value) * self.base_per_unit if int(value) > 0 else int(value))
        if self.kind == "bool":
            return "on" if value else "off"
        return _conf_string(str(value))

    def in_pg_settings(self, value: Value) -> str:
        """What ``pg_settings.setting`` says once the server runs with ``value``."""
        if self.kind == "int":
            return str(int(value) * self.base_per_unit if int(value) > 0 else int(value))
        if self.kind == "bool":
            return "on" if value else "off"
        return str(value)


_WEEK_MS = 7 * 24 * 3600 * 1000

TUNABLES: tuple[Tunable, ...] = (
    Tunable("work_mem", "int", 4, "MB", 1, 1024, base_per_unit=1024,
            help=N_("Memory a sort or hash may use before it spills to disk, per operation.")),
    Tunable("statement_timeout", "int", 0, "ms", 0, _WEEK_MS,
            help=N_("Cancel any statement that runs longer; 0 means no limit.")),
    Tunable("idle_in_transaction_session_timeout", "int", 0, "ms", 0, _WEEK_MS,
            help=N_("End sessions idle inside an open transaction for longer; 0 means never.")),
    Tunable("log_min_duration_statement", "int", -1, "ms", -1, 86_400_000,
            help=N_("Log statements that run at least this long; -1 turns it off, 0 logs all.")),
    Tunable("deadlock_timeout", "int", 1000, "ms", 500, 1_800_000,
            help=N_("How long to wait on a lock before checking for a deadlock.")),
    Tunable("autovacuum_naptime", "int", 60, "s", 1, 86_400,
            help=N_("Delay between two autovacuum rounds over a database.")),
    Tunable("temp_file_limit", "int", -1, "kB", -1, 2_147_483_647,
            help=N_("Temporary file space a session may use; -1 means no limit.")),
    Tunable("jit", "bool", True, help=N_("Compile parts of costly queries just in time (LLVM).")),
    Tunable("track_io_timing", "choice", "off", choices=("on", "off"),
            help=N_("Time disk reads and writes (EXPLAIN BUFFERS, statistics); small overhead.")),
    Tunable("timezone", "timezone", "UTC", help=N_("The time zone sessions start in.")),
)  # fmt: skip
TUNABLES_BY_NAME = {tunable.name: tunable for tunable in TUNABLES}

_TIMEZONE_RE = re.compile(r"[A-Za-z0-9_+\-]+(/[A-Za-z0-9_+\-]+)*")


@cache
def _timezones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones()) | {"UTC"}


def _conf_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


class InvalidSettings(ValueError):
    """Some values are refused: ``problems`` maps each setting (or ``unknown``) to the reason, a
    Message rendered in the reader's language."""

    def __init__(self, problems: dict[str, Message]) -> None:
        super().__init__("; ".join(f"{key}: {why}" for key, why in problems.items()))
        self.problems = problems


def _check(tunable: Tunable, value: Any) -> tuple[Value | None, Message | None]:
    """The value in its type, or why it is refused."""
    if tunable.kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            return None, Message(
                N_("must be a whole number of %(unit)s"), "config.not_a_number", unit=tunable.unit
            )
        assert tunable.minimum is not None and tunable.maximum is not None
        if not tunable.minimum <= value <= tunable.maximum:
            return None, Message(
                N_("must be between %(min)s and %(max)s %(unit)s"),
                "config.out_of_range",
                min=tunable.minimum,
                max=tunable.maximum,
                unit=tunable.unit,
            )
        return value, None
    if tunable.kind == "bool":
        if isinstance(value, bool):
            return value, None
        return None, Message(N_("must be true or false"), "config.not_a_bool")
    if tunable.kind == "choice":
        if isinstance(value, str) and value in tunable.choices:
            return value, None
        return None, Message(
            N_("must be one of %(choices)s"), "config.not_a_choice", choices=", ".join(tunable.choices)
        )
    if isinstance(value, str) and _TIMEZONE_RE.fullmatch(value) and value in _timezones():
        return value, None
    return None, Message(N_("must be a time zone name such as UTC or Europe/Paris"), "config.not_a_time_zone")


def validate(changes: Mapping[str, Any]) -> dict[str, Value]:
    """Every change checked (all of them, so that every problem is told at once): the values in
    their types, or InvalidSettings. Unknown names are refused together under ``unknown``."""
    problems: dict[str, Message] = {}
    unknown = sorted(str(name) for name in changes if name not in TUNABLES_BY_NAME)
    if unknown:
        problems["unknown"] = Message(
            N_("not settings that can be changed here: %(names)s"),
            "config.unknown_setting",
            names=", ".join(unknown),
        )
    values: dict[str, Value] = {}
    for name, raw in changes.items():
        tunable = TUNABLES_BY_NAME.get(name)
        if tunable is None:
            continue
        value, problem = _check(tunable, raw)
        if problem is not None:
            problems[name] = problem
        else:
            assert value is not None
            values[name] = value
    if problems:
        raise InvalidSettings(problems)
    return values


def parse_text(name: str, text: str) -> Any:
    """A value typed on the command line (``key=value``) in the setting's JSON type; what is
    not recognised is passed on as text, for ``validate`` to refuse with its reason."""
    tunable = TUNABLES_BY_NAME.get(name)
    text = text.strip()
    if tunable is None:
        return text
    if tunable.kind == "int" and re.fullmatch(r"-?\d{1,12}", text):
        return int(text)
    if tunable.kind == "bool" and text.lower() in {"true", "false", "on", "off"}:
        return text.lower() in {"true", "on"}
    return text


def effective(stored: Mapping[str, Any]) -> dict[str, Value]:
    """Every setting's value: the stored one, or its default (anything stored that is no longer
    offered is left out)."""
    return {t.name: stored.get(t.name, t.default) for t in TUNABLES}


def render(stored: Mapping[str, Any]) -> str:
    """The included configuration file: only the settings that were set, each validated again,
    and one that does not pass left out (a row edited by hand puts nothing else in the file,
    and never keeps the server from starting)."""
    values: dict[str, Value] = {}
    for name, raw in stored.items():
        try:
            values.update(validate({name: raw}))
        except InvalidSettings:
            continue
    lines = ["# Written by the control panel from the cluster's configuration; edits here are overwritten."]
    lines += [f"{name} = {TUNABLES_BY_NAME[name].rendered(value)}" for name, value in sorted(values.items())]
    return "\n".join(lines) + "\n"
