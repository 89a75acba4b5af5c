"""A new cluster's data directory from the template (PANEL_PGDATA_TEMPLATE) against initdb, side
by side in one run: ``--rounds`` pairs, alternating which goes first, each the data directory step
alone (the rest of provisioning is the same either way) and the whole provisioning.

    .venv/bin/python scripts/perf/pgdata_template.py [--rounds 5]

Prints, last: ``pgdata: initdb <s> s, template <s> s median (x<ratio>); provision <s> s vs <s> s``.
Not part of `make test`. Compare within a run (the machine is shared).
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import time
from pathlib import Path

from _cli import counts_parser

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ["DJANGO_SETTINGS_MODULE"] = "panel.test_settings"


def main() -> None:
    args = counts_parser(__doc__, rounds=5).parse_args()

    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.core.management import call_command

    from panel.clusters import services
    from panel.clusters.engine import pgdata_template

    call_command("migrate", verbosity=0)
    owner = User.objects.create_user("perf", "perf@example.com", "perf-password-1")
    step = {"initdb": [], "template": []}
    whole = {"initdb": [], "template": []}
    real_initdb = pgdata_template.initdb

    def timed_initdb(*a: object, **kw: object) -> None:
        started = time.monotonic()
        real_initdb(*a, **kw)  # type: ignore[arg-type]
        step["template" if settings.PANEL_PGDATA_TEMPLATE else "initdb"].append(time.monotonic() - started)

    pgdata_template.initdb = timed_initdb  # type: ignore[assignment]
    try:
        # The template itself is made once, before the rounds (what a long-lived panel pays once).
        settings.PANEL_PGDATA_TEMPLATE = True
        first = services.provision_cluster(
            services.create_cluster(owner, name="perf-warm", plan_slug="db-s-1vcpu-1gb", enqueue=False).pk
        )
        services.delete_cluster(first, confirm_name=first.name)
        step["template"].clear()
        for index in range(args.rounds):
            order = ["initdb", "template"] if index % 2 == 0 else ["template", "initdb"]
            for kind in order:
                settings.PANEL_PGDATA_TEMPLATE = kind == "template"
                started = time.monotonic()
                made = services.create_cluster(
                    owner, name=f"perf-{kind}-{index}", plan_slug="db-s-1vcpu-1gb", enqueue=False
                )
                cluster = services.provision_cluster(made.pk)
                whole[kind].append(time.monotonic() - started)
                if cluster.status != "online":
                    sys.exit(f"provisioning failed: {cluster.error_message}")
                services.delete_cluster(cluster, confirm_name=cluster.name)
    finally:
        pgdata_template.initdb = real_initdb  # type: ignore[assignment]
        shutil.rmtree(settings.PANEL_DATA_DIR, ignore_errors=True)
    medians = {kind: statistics.median(values) for kind, values in step.items()}
    provisions = {kind: statistics.median(values) for kind, values in whole.items()}
    print(
        f"pgdata: initdb {medians['initdb']:.2f} s, template {medians['template']:.2f} s median "
        f"(x{medians['initdb'] / medians['template']:.1f}); provision {provisions['initdb']:.1f} s vs "
        f"{provisions['template']:.1f} s"
    )


if __name__ == "__main__":
    main()
