"""Part of ``manage.py cluster``: a cluster's floating address (``floating-address``), an
operator's setting (no page or API call changes it), calling ``standbys/services/vip.py``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from django.core.management.base import CommandError

from panel.clusters.management.cli import PanelCommand, find_cluster
from panel.clusters.standbys.services import vip


class VipSubcommands(PanelCommand):
    def add_vip_arguments(self, add: Callable[..., argparse.ArgumentParser]) -> None:
        p = add(
            "floating-address",
            "Show, set or remove a cluster's floating address (the panel moves it to the primary's "
            "node; the nodes share one network).",
        )
        p.add_argument(
            "address", nargs="?", metavar="ADDRESS", help="an IPv4 address with its prefix, e.g. 10.0.0.50/24"
        )
        p.add_argument("--none", action="store_true", help="remove the floating address")

    def do_floating_address(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["name"], options.get("owner"))
        if options["address"] and options["none"]:
            raise CommandError("Give an ADDRESS or --none, not both.")
        if not options["address"] and not options["none"]:
            shown = cluster.floating_address or "none"
            self.stdout.write(f"{cluster.name}: floating address {shown}")
            return
        missed = vip.set_floating_address(cluster, None if options["none"] else options["address"])
        shown = cluster.floating_address or "none"
        self.stdout.write(self.style.SUCCESS(f"{cluster.name}: floating address {shown}"))
        for line in missed:
            self.stderr.write(f"Not applied yet on {line} (its reconciler will).")
