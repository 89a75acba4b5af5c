"""One function per user action on benchmarks, called by views, the ``bench`` command and tasks.

The queue: runs on one cluster execute one at a time, oldest first. A partial unique index
(``benchmarkrun_one_running_per_cluster``) makes the database refuse a second running run, so a
claim is a conditional update inside one transaction. A task whose run cannot start yet returns and
leaves it queued; whoever frees the cluster (a finishing run, a cancel, the reaper) enqueues the
next run in line, and the reaper re-enqueues a queue that stalled (a lost message).

Liveness: the process executing a run writes ``heartbeat_at`` every few seconds. The reaper (a beat
task every 15 s) fails a running run whose heartbeat is older than 45 s, or whose worker process on
this machine is gone, kills its pgbench process group and starts the next run.

Callers use ``from benchmarks import services`` and ``services.<name>``; the modules are
``config`` (settings), ``enqueue`` (the broker, next in line), ``targets`` (where pgbench connects),
``launch`` (validate, warn, launch, cancel), ``sweeps`` (plan, cancel, run in the foreground),
``sweep_pool`` (a pool-size sweep's resizes and restore), ``sweep_report`` (a sweep's grid), ``execute`` (claim and run, with
``percentiles``), ``reaper``, ``datasets`` (``pgbench -i``), ``read`` (samples, compare, export)
and ``pages`` (what the benchmark pages show, read without a request).
A test that patches a name patches it in the module that looks it up, not here.
"""

from benchmarks.services.config import (
    HOSTNAME,
    SCRIPT_FILE,
    heartbeat_interval,
    percentile_budget,
    requeue_after,
    run_margin,
    worker_lost_after,
)
from benchmarks.services.datasets import cleanup_dataset, execute_init, init_dataset, latest_dataset
from benchmarks.services.enqueue import INIT_TASK, RUN_TASK, kick_next, next_in_line, run_time_limit
from benchmarks.services.execute import TICK_S, claim_run, execute_run, workdir_prefix
from benchmarks.services.launch import (
    cancel_run,
    choose_sampling_rate,
    launch_run,
    preview_warnings,
    validate_run,
)
from benchmarks.services.pool_slowdown import compare_slowdowns, slowdown_note
from benchmarks.services.read import (
    SAMPLE_FIELDS,
    compare_records,
    compare_runs,
    export_run,
    live_figures,
    live_state,
    run_record,
    samples_after,
    shown_command,
    sweep_results,
)
from benchmarks.services.reaper import reap
from benchmarks.services.recorder import NOT_COUNTED
from benchmarks.services.sweep_pool import prepare_step, restore_pool
from benchmarks.services.sweep_report import sweep_report
from benchmarks.services.sweeps import cancel_sweep, check_pool_sizes, execute_sweep, launch_sweep
from benchmarks.services.targets import LOOPBACK, ResolvedTarget, resolve_target
from panel.core.errors import ServiceError

__all__ = [
    "HOSTNAME",
    "INIT_TASK",
    "LOOPBACK",
    "NOT_COUNTED",
    "RUN_TASK",
    "SAMPLE_FIELDS",
    "SCRIPT_FILE",
    "TICK_S",
    "ResolvedTarget",
    "ServiceError",
    "cancel_run",
    "cancel_sweep",
    "check_pool_sizes",
    "choose_sampling_rate",
    "claim_run",
    "compare_records",
    "compare_runs",
    "compare_slowdowns",
    "execute_init",
    "execute_run",
    "execute_sweep",
    "export_run",
    "heartbeat_interval",
    "cleanup_dataset",
    "init_dataset",
    "kick_next",
    "latest_dataset",
    "launch_run",
    "launch_sweep",
    "next_in_line",
    "percentile_budget",
    "prepare_step",
    "preview_warnings",
    "reap",
    "requeue_after",
    "resolve_target",
    "restore_pool",
    "run_margin",
    "live_figures",
    "live_state",
    "run_record",
    "run_time_limit",
    "samples_after",
    "shown_command",
    "slowdown_note",
    "sweep_report",
    "sweep_results",
    "validate_run",
    "workdir_prefix",
    "worker_lost_after",
]
