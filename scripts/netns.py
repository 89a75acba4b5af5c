"""Nodes with addresses of their own on this machine, for an operator (issue 39): the tests' network
namespace harness (scripts/netns_harness.py), left up until `down`. Run as root.

    scripts/netns.py up --nodes 3          slot 0: the bridge's root side 198.18.0.1, nodes .11-.13
    scripts/netns.py status                every harness on this machine, the tests' ones too
    scripts/netns.py exec 2 -- ip addr     a program in node 2's namespace (no shell)
    scripts/netns.py freeze 2 / thaw 2     every process of node 2 stopped / continued
    scripts/netns.py link-down 2 / link-up 2
    scripts/netns.py down                  everything of the harness removed, its processes killed

`--slot N` (0-15) picks another /28 of 198.18.0.0/24: 198.18.0.(16N)/28. The tests use slots 8-15.
Nothing in a node's namespace reaches anything but its slot's addresses and its own loopback.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import netns_harness as nh  # noqa: E402


def _status() -> int:
    found = False
    for slot in nh.SLOTS:
        prefix = nh.prefix_of(slot)
        tag = nh.owner(slot)  # first: a harness being removed loses its bridge last
        harness = nh.existing(slot)
        if harness is None and tag is None and not nh.links(prefix):
            continue
        found = True
        layout = nh.Layout(slot, 1)
        who = "operator" if nh.by_operator(tag) else (tag or "no bridge")
        state = "up" if nh.alive(tag) else "LEFTOVER of a run that is gone (the next claim removes it)"
        print(
            f"slot {slot} ({prefix}): {layout.network}, root side {layout.root_address}; {state}; owner {who}"
        )
        for node in harness.nodes if harness is not None else []:
            pids = nh.pids(node.namespace)
            frozen = bool(pids) and all(nh.stopped(pid) for pid in pids)
            link = [row for row in nh.links(prefix) if row["ifname"] == node.veth]
            link_state = link[0].get("operstate", "?") if link else "missing"
            print(
                f"  node {node.index}: {node.address} in {node.namespace}, link {link_state}, "
                f"{len(pids)} process(es){' FROZEN' if frozen else ''}"
            )
    if not found:
        print("no harness on this machine")
    return 0


def _node(args: argparse.Namespace) -> tuple[nh.Harness, nh.Node]:
    harness = nh.existing(args.slot)
    if harness is None:
        raise nh.HarnessError(f"no harness in slot {args.slot}: `up` first")
    if not any(node.index == args.node for node in harness.nodes):
        raise nh.HarnessError(f"slot {args.slot} has no node {args.node}")
    return harness, harness.node(args.node)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    slot = argparse.ArgumentParser(add_help=False)
    slot.add_argument("--slot", type=int, default=nh.OPERATOR_SLOT, help="which /28 of 198.18.0.0/24 (0-15)")
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", parents=[slot], help="make the nodes and leave them up")
    up.add_argument("--nodes", type=int, default=3, help="how many (1-4)")
    commands.add_parser("down", parents=[slot], help="remove the slot's harness and kill its processes")
    commands.add_parser("status", help="every harness on this machine")
    for name in ("freeze", "thaw", "link-down", "link-up"):
        commands.add_parser(name, parents=[slot], help=f"{name} one node").add_argument("node", type=int)
    run = commands.add_parser("exec", parents=[slot], help="run a program in a node's namespace")
    run.add_argument("node", type=int)
    run.add_argument("argv", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)

    if os.geteuid() != 0:
        print("network namespaces need root", file=sys.stderr)
        return 1
    try:
        if args.command == "status":
            return _status()
        if args.command == "up":
            harness = nh.operator_up(args.nodes, args.slot)
            print(f"slot {args.slot}: root side {harness.layout.root_address} on {harness.layout.bridge}")
            for node in harness.nodes:
                print(f"  node {node.index}: {node.address} (ip netns exec {node.namespace} …)")
            return 0
        if args.command == "down":
            tag = nh.owner(args.slot)
            if nh.alive(tag) and not nh.by_operator(tag):
                raise nh.HarnessError(f"slot {args.slot} belongs to a running test ({tag}): not removed")
            nh.remove(nh.prefix_of(args.slot))
            print(f"slot {args.slot}: removed")
            return 0
        harness, node = _node(args)
        if args.command == "exec":
            command = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
            return subprocess.run(harness.command(node, command)).returncode
        if args.command == "freeze":
            harness.freeze(node)
        elif args.command == "thaw":
            harness.thaw(node)
        elif args.command == "link-down":
            harness.link_down(node)
        else:
            harness.link_up(node)
        print(f"node {node.index} ({node.address}): {args.command} done")
        return 0
    except (nh.HarnessError, ValueError) as exc:
        print(exc, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
