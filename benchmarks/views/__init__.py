"""The benchmark pages: the tab (``tab``), one run (``runs``), comparisons and sweeps (``results``).

Thin: the run or cluster in the URL (404 to outsiders), a form, one service call, a template or
JSON. What a page shows is read by ``benchmarks.services.pages``.
"""

from benchmarks.views.results import compare, compare_data, sweep_cancel, sweep_data, sweep_detail
from benchmarks.views.runs import run_cancel, run_detail, run_export, run_samples
from benchmarks.views.tab import dataset_init, datasets, history, run_check, run_launch, sweep_launch, tab

__all__ = [
    "compare",
    "compare_data",
    "dataset_init",
    "datasets",
    "history",
    "run_cancel",
    "run_check",
    "run_detail",
    "run_export",
    "run_launch",
    "run_samples",
    "sweep_cancel",
    "sweep_data",
    "sweep_detail",
    "sweep_launch",
    "tab",
]
