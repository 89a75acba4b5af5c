"""Work on a cluster's processes, sockets and files runs where the cluster lives: in its node agent.

Under ``make run`` as root the web server runs as an unprivileged user that can open no cluster's
socket, file or process (issue 10), and a web or beat process elsewhere has none of them at all
(issue 13's nodes). What such a process needs done there is a call to a service function marked
``@on_node``: in a process whose role is ``web`` the call is sent to the node agent (a Celery
worker consuming ``node.<name>``) and its answer awaited; in the agent, and in a process that may
do everything (role ``all``: the tests, ``manage.py`` as root), it runs in place.

Arguments and answers cross as JSON: model rows by primary key (read again on the other side),
dataclasses of the panel's own modules field by field, a ServiceError as its message, field and code.
Only functions marked ``@on_node`` can be called this way: the agent refuses every other name.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import importlib
import logging
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from celery import shared_task
from django.conf import settings

from panel.core import taskqueue
from panel.core.errors import (
    N_,
    Message,
    ServiceError,
    message_from_json,
    message_to_json,
    params_from_wire,
    params_to_wire,
)

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])
TASK = "panel.core.agent.call"
# Modules whose functions and dataclasses may be named in a message: the panel's own.
OWN_PACKAGES = ("panel.", "benchmarks.")

_registry: dict[str, Callable[..., Any]] = {}
# Old dotted names of modules (or of one function) that moved, each app's own registered in its
# ready(): a call queued before an update, or sent by a node not updated yet, still names them.
MOVED: dict[str, str] = {}


def current_name(dotted: str) -> str:
    """``dotted`` (``module.function`` or ``module:Class``) as it is named now; the most specific
    old name wins."""
    for old in sorted(MOVED, key=len, reverse=True):
        if dotted == old or dotted.startswith((old + ".", old + ":")):
            return MOVED[old] + dotted[len(old) :]
    return dotted


def role() -> str:
    """``web`` (send to the agent), ``agent`` or ``all`` (run in place)."""
    return settings.PANEL_PROCESS_ROLE


def node_queue(node: str | None = None) -> str:
    return f"node.{node or settings.PANEL_NODE_NAME}"


def _on_a_node(values: list[Any]) -> Any:
    """The first argument that lives on a node: a cluster, or a row of one (its ``cluster``)."""
    for value in values:
        if isinstance(getattr(value, "agent_queue", None), str):
            return value
        if hasattr(type(value), "cluster_id"):
            cluster = getattr(value, "cluster", None)
            if isinstance(getattr(cluster, "agent_queue", None), str):
                return cluster
    return None


def on_node(timeout: float = 30.0) -> Callable[[F], F]:
    """Mark a service function as work on the cluster's node (see the module's docstring).
    ``timeout``: how long a web process waits for the agent's answer."""

    def mark(func: F) -> F:
        name = f"{func.__module__}.{func.__qualname__}"
        _registry[name] = func

        @functools.wraps(func)
        def call(*args: Any, **kwargs: Any) -> Any:
            if role() != "web":
                return func(*args, **kwargs)
            return send(name, args, kwargs, timeout=timeout)

        return call  # type: ignore[return-value]

    return mark


# --- a web process runs and signals nothing --------------------------------------------------------

# Audit events (sys.addaudithook) of starting or signalling a process.
PROCESS_EVENTS = frozenset(
    {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.kill", "os.killpg"}
)
_guarded = False


class WebMayNotTouchProcesses(PermissionError):
    """A process whose role is "web" tried to start or signal a process."""


def _refuse_in_web(event: str, args: tuple[Any, ...]) -> None:
    if event in PROCESS_EVENTS and settings.PANEL_PROCESS_ROLE == "web":
        raise WebMayNotTouchProcesses(
            f"{event} refused: a web process starts and signals no process; that is the node agent's work"
        )


def forbid_processes_in_web() -> None:
    """From now on, while this process's role is "web", starting a program or sending a signal
    raises WebMayNotTouchProcesses (an audit hook: it holds for every module, the panel's own and
    the libraries', whatever they import). Installed by the web server and beat at start."""
    global _guarded
    if not _guarded:
        import sys

        sys.addaudithook(_refuse_in_web)
        _guarded = True


# --- the wire ------------------------------------------------------------------------------------


def encode(value: Any) -> Any:
    """A JSON-able form of ``value`` that ``decode`` turns back into it."""
    from django.db import models

    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, models.Model):
        return {"$model": value._meta.label, "pk": str(value.pk)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        kind = type(value)
        return {
            "$dataclass": f"{kind.__module__}:{kind.__qualname__}",
            "fields": {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init},
        }
    if isinstance(value, list | tuple):
        return {"$tuple" if isinstance(value, tuple) else "$list": [encode(item) for item in value]}
    if isinstance(value, dict):
        return {"$dict": [[encode(key), encode(item)] for key, item in value.items()]}
    if isinstance(value, uuid.UUID):
        return {"$uuid": str(value)}
    if isinstance(value, dt.datetime):
        return {"$datetime": value.isoformat()}
    if isinstance(value, Path):
        return {"$path": str(value)}
    if isinstance(value, Message):
        return {"$text": message_to_json(value)}
    raise TypeError(f"cannot send a {type(value).__name__} to the node agent")


def _own(dotted: str) -> Any:
    module, _sep, qualname = current_name(dotted).partition(":")
    if not module.startswith(OWN_PACKAGES):
        raise ValueError(f"not one of the panel's own modules: {module}")
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


def decode(value: Any) -> Any:
    from django.apps import apps

    if not isinstance(value, dict):
        return value
    if "$model" in value:
        model = apps.get_model(value["$model"])
        return model._base_manager.get(pk=value["pk"])
    if "$dataclass" in value:
        kind = _own(value["$dataclass"])
        if not (isinstance(kind, type) and dataclasses.is_dataclass(kind)):
            raise ValueError(f"not a dataclass: {value['$dataclass']}")
        return kind(**{name: decode(item) for name, item in value["fields"].items()})
    if "$list" in value:
        return [decode(item) for item in value["$list"]]
    if "$tuple" in value:
        return tuple(decode(item) for item in value["$tuple"])
    if "$dict" in value:
        return {decode(key): decode(item) for key, item in value["$dict"]}
    if "$uuid" in value:
        return uuid.UUID(value["$uuid"])
    if "$datetime" in value:
        return dt.datetime.fromisoformat(value["$datetime"])
    if "$path" in value:
        return Path(value["$path"])
    if "$text" in value:
        return message_from_json(value["$text"])
    raise ValueError(f"unknown value on the wire: {sorted(value)}")


# --- the web's side --------------------------------------------------------------------------------


def send(
    name: str, args: tuple[Any, ...], kwargs: dict[str, Any], *, timeout: float, queue: str | None = None
) -> Any:
    """Run the marked function ``name`` in the node agent and return its answer (or raise its
    ServiceError). An agent that does not answer within ``timeout`` is a ServiceError; the
    message expires then, so an agent that comes back later does not act on it (the expiry is
    signed with the call, and the agent runs a call once: panel/signing.py). ``queue``: the
    agent of another node than the arguments' cluster's (a member of it on that node)."""
    from celery.exceptions import TimeoutError as CeleryTimeout

    message = {"args": encode(list(args)), "kwargs": encode(kwargs)}
    about = _on_a_node([*args, *kwargs.values()])
    if queue is not None:
        about = None
    else:
        queue = about.agent_queue if about is not None else node_queue()
    silent = getattr(about, "agent_silent", None)
    if callable(silent) and silent():
        # Its heartbeats stopped: say so now rather than after the whole timeout.
        raise ServiceError(
            N_("The node agent “%(node)s” is not answering (no heartbeat lately), so nothing was done."),
            code="agent.not_answering",
            params={"node": queue.removeprefix("node.")},
        )
    result = taskqueue.send(TASK, [name, message], queue=queue, expires=timeout)
    try:
        answer = result.get(timeout=timeout, propagate=True, disable_sync_subtasks=False)
    except CeleryTimeout:
        raise ServiceError(
            N_(
                "The node agent “%(node)s” did not answer within %(seconds)d s, so nothing was done. "
                "Check that its worker runs (make run starts it)."
            ),
            code="agent.timeout",
            params={"node": queue.removeprefix("node."), "seconds": timeout},
        ) from None
    finally:
        result.forget()
    if "error" in answer:
        raise error_from(answer)
    if "crash" in answer:
        # The traceback is in the agent's log; the caller gets a refusal with a code, never an
        # exception that would become a 500 (issue 29).
        log.error("the node agent %s could not run %s: %s", queue, name, answer["crash"])
        raise ServiceError(
            N_(
                "The node agent “%(node)s” could not finish this action; its log has the details. "
                "Nothing was kept."
            ),
            code="agent.failed",
            params={"node": queue.removeprefix("node.")},
        )
    return decode(answer["result"])


# --- the agent's side ------------------------------------------------------------------------------


def error_answer(exc: ServiceError) -> dict[str, Any]:
    """A refusal as the agent answers it: its template and parameters (rendered where the error
    is read, in the user's language), its code and field; ``error`` its words here, for logs."""
    return {
        "error": exc.message,
        "template": exc.template,
        "params": params_to_wire(exc.params) if exc.params is not None else None,
        "field": exc.field,
        "code": exc.code,
    }


def error_from(answer: dict[str, Any]) -> ServiceError:
    """The web's side of ``error_answer``."""
    params = params_from_wire(answer["params"]) if answer.get("params") is not None else None
    return ServiceError(
        answer.get("template", answer["error"]), answer.get("field"), answer.get("code"), params
    )


def lookup(name: str) -> Callable[..., Any]:
    """The marked function ``name``; importing its module (one of the panel's own) if no marked
    function of that name is known yet. Anything else is refused."""
    name = current_name(name)
    func = _registry.get(name)
    if func is None and name.startswith(OWN_PACKAGES):
        module = name.rsplit(".", 1)[0]
        while module and func is None:
            try:
                importlib.import_module(module)
            except ImportError:
                module = module.rsplit(".", 1)[0] if "." in module else ""
                continue
            func = _registry.get(name)
            break
    if func is None:
        raise LookupError(f"{name} is not a function the node agent runs")
    return func


@shared_task(name=TASK, ignore_result=False)
def call(name: str, message: dict[str, Any]) -> dict[str, Any]:
    """The agent's end: run the marked function and answer with its result or its refusal."""
    try:
        func = lookup(name)
        args = decode(message["args"])
        kwargs = decode(message["kwargs"])
    except (LookupError, ValueError, TypeError) as exc:
        log.warning("refused a call to %s: %s", name, exc)
        return {"crash": f"refused: {exc}"}
    try:
        return {"result": encode(func(*args, **kwargs))}
    except ServiceError as exc:
        return error_answer(exc)
    except Exception as exc:
        log.exception("%s failed in the node agent", name)
        return {"crash": f"{name} failed in the node agent: {type(exc).__name__}: {exc}"}
