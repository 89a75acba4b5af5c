"""One function per user action on quotas, and the periodic cycle.

- ``actions``: set or remove a quota, set the grace periods, allow writes for a while.
- ``cycle``: measure a cluster, judge each quota and the plan's disk, stop or restart writes.
- ``report``: repquota's report as text and CSV.
"""

from panel.quotas.services.actions import allow_writes, remove_quota, set_grace, set_quota
from panel.quotas.services.cycle import full_among, is_full, run_all, run_cycle, storage_of
from panel.quotas.services.report import Row, grace_columns, report_csv, report_text, row_of, rows

__all__ = [
    "Row",
    "allow_writes",
    "grace_columns",
    "full_among",
    "is_full",
    "remove_quota",
    "report_csv",
    "report_text",
    "row_of",
    "rows",
    "run_all",
    "run_cycle",
    "set_grace",
    "set_quota",
    "storage_of",
]
