"""Whether a pgbench run or initialisation is sound (pure, no Django).

``problems`` are the blocking errors, each naming the field of the form (and option of ``bench``)
it is about, so the form, the command and the services refuse with the same words. sysbench's own
rules are in :mod:`benchmarks.lib.sysbench_command`; the engine of a run picks its rules
(:mod:`benchmarks.lib.engines`).
"""

from __future__ import annotations

from collections.abc import Sequence

from benchmarks.lib.run_options import (
    BUILTIN_SCRIPTS,
    INIT_STEP_LETTERS,
    MAX_CLIENTS,
    MAX_DURATION_S,
    MAX_PROGRESS_S,
    MAX_SCALE,
    MAX_TRANSACTIONS,
    QUERY_MODES,
    InitOptions,
    RunOptions,
)
from panel.core.errors import N_, Count, Message


def problems(options: RunOptions) -> list[tuple[str, Message]]:
    """Blocking errors as ``(field, sentence)``; empty when pgbench will accept the options.

    ``field`` is the run form's field (and ``bench run``'s option) the error is about; the sentence
    is a Message, put into words in the reader's language when shown.
    """
    found = clients_problems(options)
    if options.threads < 1:
        found.append(problem("threads", N_("Threads must be at least 1."), "run.threads_range"))
    elif options.threads > options.clients >= 1:
        found.append(
            problem(
                "threads",
                N_("Threads (%(threads)s) cannot exceed clients (%(clients)s)."),
                "run.threads_over_clients",
                threads=options.threads,
                clients=options.clients,
            )
        )
    if options.duration_s is None and options.transactions is None:
        found.append(
            problem(
                "duration",
                N_("Give a duration or a number of transactions per client."),
                "run.length_missing",
            )
        )
    elif options.duration_s is not None and options.transactions is not None:
        found.append(
            problem(
                "duration",
                N_("Give a duration or a number of transactions per client, not both."),
                "run.length_both",
            )
        )
    if options.duration_s is not None:
        found += bounds_problems("duration", options.duration_s)
    if options.transactions is not None:
        found += bounds_problems("transactions", options.transactions)
    found += bounds_problems("progress", options.progress_interval_s)
    if options.builtin is not None and options.custom_script_path is not None:
        found.append(
            problem("script", N_("Choose a built-in script or a custom script, not both."), "run.script_both")
        )
    elif options.builtin is not None and options.builtin not in BUILTIN_SCRIPTS:
        sentence = N_("Unknown built-in script %(script)s: choose one of %(choices)s.")
        found.append(unknown_script(options.builtin, BUILTIN_SCRIPTS, sentence))
    if options.custom_script_path is not None and not options.custom_script_path.strip():
        found.append(problem("script", N_("The custom script path is empty."), "run.script_path_empty"))
    if options.query_mode not in QUERY_MODES:
        found.append(
            problem(
                "query_mode",
                N_("Unknown query mode %(mode)s: choose one of %(choices)s."),
                "run.query_mode_unknown",
                mode=repr(options.query_mode),
                choices=", ".join(QUERY_MODES),
            )
        )
    if options.rate is not None and not options.rate > 0:
        found.append(
            problem("rate", N_("Rate must be greater than 0 transactions per second."), "run.rate_range")
        )
    if options.latency_limit_ms is not None and not options.latency_limit_ms > 0:
        found.append(
            problem(
                "latency_limit", N_("Latency limit must be greater than 0 ms."), "run.latency_limit_range"
            )
        )
    if options.max_tries is not None:
        if options.max_tries < 0:
            found.append(
                problem(
                    "max_tries", N_("Maximum tries must be 0 (unlimited) or more."), "run.max_tries_range"
                )
            )
        elif options.max_tries == 0 and options.latency_limit_ms is None and options.duration_s is None:
            found.append(
                problem(
                    "max_tries",
                    N_("Unlimited tries need a latency limit or a duration."),
                    "run.max_tries_unbounded",
                )
            )
    found += [("log", error) for error in _log_errors(options)]
    return found


def problem(field: str, sentence: str, code: str, **params: object) -> tuple[str, Message]:
    """One blocking error: the field it is about, and its sentence (``params`` fill it in)."""
    return (field, Message(sentence, code, **params))


def unknown_script(script: str | None, scripts: Sequence[str], sentence: str) -> tuple[str, Message]:
    """The script field's error for a built-in name not among ``scripts`` (``sentence`` names it as
    ``%(script)s`` and the ones to choose from as ``%(choices)s``)."""
    return problem("script", sentence, "run.script_unknown", script=repr(script), choices=", ".join(scripts))


def range_problems(
    field: str, value: float | None, maximum: int, sentence: str, code: str
) -> list[tuple[str, Message]]:
    """``field``'s error when ``value`` is missing or outside 1 … ``maximum`` (``sentence`` names
    the maximum as ``%(max)s``); empty when it is inside."""
    if value is not None and 1 <= value <= maximum:
        return []
    return [problem(field, sentence, code, max=Count(maximum))]


# The fields whose values run from 1 to a maximum: that maximum, and the refusal's sentence
# (naming it as ``%(max)s``) and code.
_BOUNDS: dict[str, tuple[int, str, str]] = {
    "clients": (MAX_CLIENTS, N_("Clients must be between 1 and %(max)s."), "run.clients_range"),
    "duration": (MAX_DURATION_S, N_("Duration must be between 1 and %(max)s seconds."), "run.duration_range"),
    "transactions": (
        MAX_TRANSACTIONS,
        N_("Transactions per client must be between 1 and %(max)s."),
        "run.transactions_range",
    ),
    "progress": (
        MAX_PROGRESS_S,
        N_("Progress interval must be between 1 and %(max)s seconds."),
        "run.progress_range",
    ),
    "scale": (MAX_SCALE, N_("Scale must be between 1 and %(max)s."), "dataset.scale_range"),
}


def bounds_problems(field: str, value: float | None) -> list[tuple[str, Message]]:
    """``field``'s error when ``value`` is missing or outside its bounds (``_BOUNDS``)."""
    maximum, sentence, code = _BOUNDS[field]
    return range_problems(field, value, maximum, sentence, code)


def clients_problems(options: RunOptions) -> list[tuple[str, Message]]:
    """The clients' bounds, every engine's (sysbench's ``--threads`` are pgbench's clients)."""
    return bounds_problems("clients", options.clients)


def validate(options: RunOptions) -> list[str]:
    """The sentences of ``problems``: what the command line prints."""
    return [str(message) for _field, message in problems(options)]


def _log_errors(options: RunOptions) -> list[Message]:
    errors: list[Message] = []
    logging_options = (options.log_prefix, options.sampling_rate, options.aggregate_interval_s)
    if not options.log_transactions and any(value is not None for value in logging_options):
        errors.append(
            Message(
                N_("Log prefix, sampling rate and aggregate interval need the transaction log (-l)."),
                "run.log_needed",
            )
        )
    if options.sampling_rate is not None and not 0 < options.sampling_rate <= 1:
        errors.append(
            Message(N_("Sampling rate must be greater than 0 and at most 1."), "run.sampling_range")
        )
    if options.sampling_rate is not None and options.aggregate_interval_s is not None:
        errors.append(
            Message(N_("Sampling and aggregation cannot be used together."), "run.sampling_and_aggregation")
        )
    interval = options.aggregate_interval_s
    if interval is not None:
        if interval < 1:
            errors.append(Message(N_("Aggregate interval must be at least 1 second."), "run.aggregate_range"))
        elif options.duration_s is not None and (
            interval > options.duration_s or options.duration_s % interval
        ):
            errors.append(
                Message(
                    N_("The duration must be a multiple of the aggregate interval."), "run.aggregate_multiple"
                )
            )
    return errors


def init_problems(options: InitOptions) -> list[tuple[str, Message]]:
    """Blocking errors for ``pgbench -i`` as ``(field, sentence)``: ``scale`` or ``init_steps``."""
    found = bounds_problems("scale", options.scale)
    steps = options.init_steps
    if steps is not None:
        unknown = sorted({letter for letter in steps if letter not in INIT_STEP_LETTERS})
        if not steps:
            found.append(
                problem("init_steps", N_("Give at least one initialization step."), "dataset.steps_missing")
            )
        elif unknown:
            found.append(
                problem(
                    "init_steps",
                    N_("Unknown initialization step %(steps)s: allowed steps are %(allowed)s."),
                    "dataset.steps_unknown",
                    steps=", ".join(map(repr, unknown)),
                    allowed=", ".join(INIT_STEP_LETTERS),
                )
            )
        elif len(set(steps)) != len(steps):
            found.append(
                problem(
                    "init_steps",
                    N_("Each initialization step may appear only once."),
                    "dataset.steps_repeated",
                )
            )
        elif "g" in steps and "G" in steps:
            found.append(
                problem(
                    "init_steps",
                    N_("Generate data client-side (g) or server-side (G), not both."),
                    "dataset.steps_both_g",
                )
            )
    return found


def validate_init(options: InitOptions) -> list[str]:
    """The sentences of ``init_problems``: what the command line prints."""
    return [str(message) for _field, message in init_problems(options)]
