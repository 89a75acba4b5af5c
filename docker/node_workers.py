"""The node agent's processes, as ``make run`` and scripts/node_agent.py start them
(scripts/children.py: node_agent_children), under a supervisor made for a container's PID 1: the
worker for ``node.<PANEL_NODE_NAME>.tasks`` and ``default`` (provisioning, actions, collection,
quota cycles, the reconciler), the work worker for ``node.<PANEL_NODE_NAME>.work`` (the tenants'
data sets and benchmarks, apart from that control work), the backups worker for
``node.<PANEL_NODE_NAME>.backups`` (backups and restores) and the agent worker on ``node.<PANEL_NODE_NAME>`` (what the web asks
of the clusters' processes, sockets and files, in threads of its own; the heartbeat). Run as root (docker/entrypoint.sh agent, or
docker/systemd/pgpanel-agent.service).

When any worker dies the others are stopped and this exits with the dead one's status, so the
container (or the unit) ends and its restart policy starts both again: a node half up would take
tasks it cannot finish. SIGTERM or SIGINT stops both (warm shutdown, then cold after
``WARM_SECONDS``) and exits 0.

As PID 1 of a container it is also the init: it reaps the PostgreSQL and PgBouncer servers whose
parent (pg_ctl, a worker) exited, and when it stops it stops them too (SIGTERM, a clean shutdown
for both; SIGKILL after ``SERVERS_SECONDS``): the container is going, and they would otherwise be
killed outright. Outside a container (systemd) they are not its business and keep running, as
under make run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
from children import node_agent_children  # noqa: E402  (the node agent's workers, defined once)

WARM_SECONDS = 10  # celery finishes its running tasks; a second signal cuts them short
COLD_SECONDS = 10
SERVERS_SECONDS = 20
POLL_SECONDS = 0.5


@dataclass
class Worker:
    name: str
    args: list[str]
    env: dict[str, str]
    proc: subprocess.Popen[bytes] | None = None
    status: int | None = None  # the raw wait status once reaped


def workers(node: str) -> list[Worker]:
    """The node agent's workers exactly as make run and scripts/node_agent.py define them."""
    return [
        Worker(child.name, list(child.args), {"PANEL_PROCESS_ROLE": "all", **child.extra_env})
        for child in node_agent_children(sys.executable, node)
    ]


def say(message: str) -> None:
    print(f"node_workers: {message}", file=sys.stderr, flush=True)


def describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"exit {os.waitstatus_to_exitcode(status)}"


class Supervisor:
    def __init__(self, procs: list[Worker]) -> None:
        self.workers = procs
        self.stop_requested = False

    def on_signal(self, signum: int, _frame: object) -> None:
        if not self.stop_requested:
            say(f"{signal.Signals(signum).name}: stopping the workers")
        self.stop_requested = True

    def reap(self) -> None:
        """Collect every child that ended: ours, and as PID 1 the orphans handed to us."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            for worker in self.workers:
                if worker.proc is not None and worker.proc.pid == pid:
                    worker.status = status
                    worker.proc.returncode = os.waitstatus_to_exitcode(status)

    def running(self) -> list[Worker]:
        return [w for w in self.workers if w.proc is not None and w.status is None]

    def signal_running(self, sig: int) -> None:
        for worker in self.running():
            assert worker.proc is not None
            os.kill(worker.proc.pid, sig)

    def wait_workers(self, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while self.running() and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
            self.reap()
        return not self.running()

    def stop_workers(self) -> None:
        self.signal_running(signal.SIGTERM)
        if self.wait_workers(WARM_SECONDS):
            return
        say(f"still running after {WARM_SECONDS} s: cold shutdown")
        self.signal_running(signal.SIGQUIT)
        if not self.wait_workers(COLD_SECONDS):
            self.signal_running(signal.SIGKILL)
            self.wait_workers(COLD_SECONDS)

    def stop_servers(self) -> None:
        """As a container's init: end what is left in it (the clusters' servers) cleanly."""
        try:
            os.kill(-1, signal.SIGTERM)
        except ProcessLookupError:
            return  # nothing left
        deadline = time.monotonic() + SERVERS_SECONDS
        while time.monotonic() < deadline:
            try:
                pid, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                time.sleep(POLL_SECONDS)
        say(f"servers still running after {SERVERS_SECONDS} s: killing them")
        os.kill(-1, signal.SIGKILL)

    def run(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self.on_signal)
        for worker in self.workers:
            env = {**os.environ, **worker.env}
            worker.proc = subprocess.Popen(worker.args, env=env)
            say(f"started {worker.name} (pid {worker.proc.pid})")
        dead: Worker | None = None
        while not self.stop_requested and dead is None:
            time.sleep(POLL_SECONDS)
            self.reap()
            dead = next((w for w in self.workers if w.status is not None), None)
        if dead is not None and dead.status is not None:
            say(f"{dead.name} ended ({describe(dead.status)}): stopping the node's workers")
        self.stop_workers()
        if os.getpid() == 1:
            self.stop_servers()
        if dead is None or dead.status is None:
            return 0
        code = os.waitstatus_to_exitcode(dead.status)
        return code if code > 0 else 1  # died of a signal, or stopped "cleanly" on its own


def main() -> int:
    os.umask(0o077)  # as every process of the panel (panel/__init__.py); the workers inherit it
    if os.geteuid() != 0:
        say("the node agent runs as root: it creates each cluster's system user and runs the servers as it")
        return 2
    return Supervisor(workers(os.environ.get("PANEL_NODE_NAME") or "local")).run()


if __name__ == "__main__":
    sys.exit(main())
