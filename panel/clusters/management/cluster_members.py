"""Parts of ``manage.py cluster``: the members of a cluster with standbys (``members``) and a
switchover (``switchover``), calling the same services as the Overview and the API."""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from collections.abc import Callable
from typing import Any

from panel.clusters.management.cli import PanelCommand, find_cluster, print_table
from panel.clusters.standbys.services import members, switchover


class MemberSubcommands(PanelCommand):
    def add_member_arguments(self, add: Callable[..., argparse.ArgumentParser]) -> None:
        p = add("members", "List a cluster's members: primary and standbys, with state and lag.")
        p.add_argument("--json", action="store_true", help="a JSON list of objects")
        p = add("switchover", "Make a standby the primary (by default the synchronous one).")
        p.add_argument("--to", metavar="MEMBER", help="the standby to promote")

    def do_members(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["name"], options.get("owner"))
        rows = members.list_members(cluster)
        if options["json"]:
            self.stdout.write(json.dumps([dataclasses.asdict(row) for row in rows], indent=2))
            return
        if not rows:
            self.stdout.write(f"{cluster.name} has one member (no standby).")
            return
        print_table(
            self.stdout,
            ("NAME", "ROLE", "NODE", "PORT", "PID", "STATE", "LAG", "TIMELINE"),
            [
                (
                    r.name,
                    r.role,
                    r.node,
                    str(r.port),
                    str(r.pid or "-"),
                    r.state,
                    "-" if r.lag_bytes is None else str(r.lag_bytes),
                    str(r.timeline or "-"),
                )
                for r in rows
            ],
        )

    def do_switchover(self, options: dict[str, Any]) -> None:
        cluster = find_cluster(options["name"], options.get("owner"))
        started = time.monotonic()
        primary = switchover.switchover(cluster, options.get("to"))
        took = time.monotonic() - started
        self.stdout.write(self.style.SUCCESS(f"{primary} is the primary of {cluster.name} ({took:.1f} s)."))
