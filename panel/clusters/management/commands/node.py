"""`manage.py node …`: the machines that hold clusters (issue 13's nodes).

A node's agent registers its node itself when it starts (PANEL_NODE_NAME, with the machine's
memory and cores); `node add` records one ahead of its agent, with the capacity you choose.
`drain` keeps a node's clusters where they are and running, and sends new ones elsewhere;
`activate` undoes it; `remove` forgets a node that holds no cluster; `vip-interface` sets the
network interface its floating addresses go on (docs/standbys.md).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from panel.clusters.management.cli import PanelCommand, human_size, print_table
from panel.clusters.models import CycleKind, EtcdMember, Node, NodeState
from panel.clusters.services import cycles, nodes
from panel.clusters.standbys.services import vip


def _ports(text: str) -> tuple[int, int]:
    first, sep, last = text.partition("-")
    try:
        return int(first), int(last) if sep else -1
    except ValueError:
        return -1, -1


class Command(PanelCommand):
    help = "Add, list, drain, activate and remove the nodes (machines) that hold clusters."
    field_labels = {"ports": "--ports", "address": "--address", "ram_gb": "--ram", "data_dir": "--data-dir"}

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
        p = sub.add_parser("add", help="Record a node ahead of its agent.")
        p.add_argument("name", metavar="NODE", help="its name; its agent consumes the queue node.<NODE>")
        p.add_argument("--address", required=True, help="the host clients connect to (connection details)")
        p.add_argument(
            "--private-address", default="", help="its address on the private network (private_connection)"
        )
        p.add_argument("--ports", required=True, metavar="FIRST-LAST", help="its clusters' port range")
        p.add_argument("--data-dir", required=True, help="where its agent keeps the clusters' data")
        p.add_argument("--ram", dest="ram_gb", type=int, required=True, metavar="GB", help="RAM for clusters")
        p.add_argument("--vcpus", type=int, required=True, help="vCPUs for clusters")
        sub.add_parser("list", help="Nodes with their capacity, clusters and last heartbeat.")
        for name, text in (
            ("drain", "Take no new clusters on this node (its clusters stay and keep running)."),
            ("activate", "Take new clusters on this node again."),
            ("remove", "Forget a node that holds no cluster."),
        ):
            sub.add_parser(name, help=text).add_argument("name", metavar="NODE")
        p = sub.add_parser("vip-interface", help="Set the network interface floating addresses go on.")
        p.add_argument("name", metavar="NODE")
        p.add_argument("interface", metavar="INTERFACE", help="e.g. eth0 (default: PANEL_VIP_INTERFACE)")

    def do_add(self, options: dict[str, Any]) -> None:
        node = nodes.add_node(
            options["name"],
            address=options["address"],
            private_address=options["private_address"],
            ports=_ports(options["ports"]),
            data_dir=options["data_dir"],
            ram_gb=options["ram_gb"],
            vcpus=options["vcpus"],
        )
        self.stdout.write(
            self.style.SUCCESS(
                f"Node {node.name} added: {node.address}, ports {node.port_first}-{node.port_last}."
            )
        )
        self.stdout.write(
            f"Start its agent on that machine with PANEL_NODE_NAME={node.name} PANEL_DATA_DIR={node.data_dir} "
            "(scripts/node_agent.py); it takes clusters once it sends heartbeats. Copy the task-signing "
            "pair (keys/celery_signing.key and .crt) there first: the agents take only signed tasks."
        )

    def do_vip_interface(self, options: dict[str, Any]) -> None:
        node = Node.objects.filter(name=options["name"]).first()
        if node is None:
            raise CommandError(f"No node named {options['name']!r}.")
        vip.set_interface(node, options["interface"])
        self.stdout.write(
            self.style.SUCCESS(f"Node {node.name}: floating addresses go on {node.vip_interface}.")
        )

    def do_list(self, options: dict[str, Any]) -> None:
        rows = []
        # Which nodes hold a member of the panel's etcd, and its state (standbys/services/etcd.py).
        etcd = dict(EtcdMember.objects.filter(node__isnull=False).values_list("node_id", "state"))
        last = cycles.last_cycles()

        def took(node_id: int, kind: str) -> str:
            cycle = last.get((node_id, kind))
            if cycle is None:
                return "-"
            return f"{cycle.seconds:.2f}s" + ("(SLOW)" if cycle.is_slow else "")

        for room in nodes.all_usage():
            node = room.node
            beat = "never" if node.heartbeat_age is None else f"{node.heartbeat_age} s ago"
            rows.append(
                (
                    node.name,
                    node.state,
                    "yes" if node.is_alive else "NO",
                    beat,
                    node.address,
                    f"{node.port_first}-{node.port_last}",
                    str(room.clusters),
                    f"{human_size(room.ram_bytes)} / {human_size(node.ram_bytes)}",
                    f"{room.vcpus} / {node.vcpus}",
                    etcd.get(node.pk, "-"),
                    "-" if node.disk_free_bytes is None else human_size(node.disk_free_bytes),
                    took(node.pk, CycleKind.RECONCILE),
                    took(node.pk, CycleKind.COLLECT),
                )
            )
        if not rows:
            self.stdout.write(
                "No nodes yet: a node agent registers its own when it starts (make run starts one)."
            )
            return
        header = (
            "NAME",
            "STATE",
            "ALIVE",
            "HEARTBEAT",
            "ADDRESS",
            "PORTS",
            "CLUSTERS",
            "RAM USED",
            "VCPUS USED",
            "ETCD",
            "DISK FREE",
            "RECONCILE",
            "COLLECT",
        )
        print_table(self.stdout, header, rows)

    def do_drain(self, options: dict[str, Any]) -> None:
        node = nodes.set_state(options["name"], NodeState.DRAINING)
        count = node.clusters.count()
        self.stdout.write(
            f"Node {node.name} is draining: its {count} cluster(s) stay; new clusters go elsewhere."
        )

    def do_activate(self, options: dict[str, Any]) -> None:
        node = nodes.set_state(options["name"], NodeState.ACTIVE)
        self.stdout.write(f"Node {node.name} takes new clusters again.")

    def do_remove(self, options: dict[str, Any]) -> None:
        nodes.remove_node(options["name"])
        self.stdout.write(f"Node {options['name']} removed.")
