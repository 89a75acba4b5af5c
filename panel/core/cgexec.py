"""Start a program inside cgroups, as another user: ``cgexec`` and ``setpriv`` in one small step.

    python -m panel.core.cgexec --uid UID --gid GID --join PROCS_FILE [--join …] -- PROGRAM ARGS…

Run as root: it writes its own pid into each ``cgroup.procs`` (or v1 ``tasks``) file named, so it
and everything it starts (pg_ctl, then the postmaster and its backends) are in those groups from
the first instruction, then drops to UID/GID with no supplementary groups and executes PROGRAM.
A process cannot join a root-owned cgroup after it dropped its privileges, and Python's
``preexec_fn`` runs after the switch of user (and is unsafe in threaded workers): hence a program.
Imports nothing of Django or of the apps, so it starts in a few tens of milliseconds.
"""

from __future__ import annotations

import argparse
import os
import sys


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="cgexec")
    parser.add_argument("--uid", type=int, required=True)
    parser.add_argument("--gid", type=int, required=True)
    parser.add_argument("--join", action="append", default=[])
    parser.add_argument("program", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not program:
        parser.error("no program to run")
    for procs in args.join:
        with open(procs, "w") as handle:
            handle.write(str(os.getpid()))
    if args.uid != os.geteuid():
        os.setgroups([])
        os.setgid(args.gid)
        os.setuid(args.uid)
    os.execvp(program[0], program)
    return 127  # not reached: execvp replaces this process or raises


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
