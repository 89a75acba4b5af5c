"""A third load generator, written as a user of the panel would add one: this module and nothing
else (named in ``PANEL_BENCH_ENGINES``, it registers itself when imported).

``pulse`` is a small Python program that runs a statement (``SELECT 1``, or the run form's field of
its own) through ``psql`` in a loop against the
run's target and reports in a format of its own, on stdout::

    pulse t=1 tx=37 ms=26.9
    pulse error: psql: error: connection to server ... failed: ...
    pulse done tx=112 seconds=3.0

Its engine says how to start it, which of the run form's fields it asks for (clients, duration,
progress, and its own ``statement``), and how to read its lines into samples, errors and a summary.
"""

from __future__ import annotations

import re
import shutil

from benchmarks.lib import engines
from benchmarks.lib.engine_base import FAILED, SUCCEEDED, BaseEngine, FieldSpec, Outcome, Sample
from benchmarks.lib.pgbench_output import SCRIPT_ERROR, ErrorLine
from benchmarks.lib.run_options import ConnectionTarget, RunOptions
from panel.core.errors import Message

NAME = "pulse"

# The program itself: argv is host, port, user, database, seconds, interval, psql's path and the
# statement; libpq
# takes the password and TLS mode from the environment the engine gives it (PGPASSWORD, PGSSLMODE).
PROGRAM = r"""
import subprocess, sys, time
host, port, user, db, seconds, interval, psql, statement = sys.argv[1:9]
seconds, interval = float(seconds), int(interval)
args = [psql, "-X", "-At", "-h", host, "-p", port, "-U", user, "-d", db, "-c", statement]
start = time.monotonic(); mark = start; tx = window = 0; spent = 0.0
while time.monotonic() - start < seconds:
    began = time.monotonic()
    done = subprocess.run(args, capture_output=True, text=True)
    if done.returncode != 0:
        print("pulse error: " + done.stderr.strip().splitlines()[0], flush=True)
        sys.exit(3)
    tx += 1; window += 1; spent += time.monotonic() - began
    if time.monotonic() - mark >= interval:
        mark += interval
        print(f"pulse t={round(mark - start)} tx={window} ms={1000 * spent / window:.1f}", flush=True)
        window = 0; spent = 0.0
print(f"pulse done tx={tx} seconds={time.monotonic() - start:.1f}", flush=True)
"""

_TICK = re.compile(r"pulse t=(\d+) tx=(\d+) ms=([\d.]+)")
_DONE = re.compile(r"pulse done tx=(\d+) seconds=([\d.]+)")


class PulseReader:
    def __init__(self, options: RunOptions) -> None:
        self.interval = options.progress_interval_s
        self.clients = options.clients
        self.done: tuple[int, float] | None = None
        self.error = ""

    def feed(self, stream: str, text: str) -> Sample | ErrorLine | None:
        line = text.strip()
        if tick := _TICK.fullmatch(line):
            return Sample(
                elapsed_s=float(tick[1]), tps=int(tick[2]) / self.interval, latency_avg_ms=float(tick[3])
            )
        if done := _DONE.fullmatch(line):
            self.done = (int(done[1]), float(done[2]))
        elif line.startswith("pulse error: "):
            self.error = line.removeprefix("pulse error: ")
            return ErrorLine(SCRIPT_ERROR, self.error, raw=line)
        return None

    def finish(self, returncode: int) -> Outcome:
        if returncode != 0 or self.done is None:
            return Outcome(FAILED, self.error or f"pulse exited with code {returncode}", None)
        tx, seconds = self.done
        summary = {
            "transactions_processed": tx,
            "tps": round(tx / seconds, 3),
            "clients": self.clients,
            "threads": 1,
            "duration_s": seconds,
        }
        return Outcome(SUCCEEDED, "", summary)


class Pulse(BaseEngine):
    name = NAME
    label = "pulse"
    program = "python3"
    scripts = {"select-1": "A statement through psql"}
    default_script = "select-1"
    # A field of its own: the run form shows it for pulse only, ``bench run --set statement=…``.
    extra_fields = (
        FieldSpec("statement", "Statement", initial="SELECT 1", help="One SELECT, run in a loop."),
    )

    def problems(self, options: RunOptions) -> list[tuple[str, Message]]:
        found = []
        if options.builtin not in self.scripts:
            found.append(("script", Message("pulse runs SELECT 1 only.", "pulse.script")))
        if options.duration_s is None:
            found.append(("duration", Message("pulse runs for a duration.", "pulse.duration")))
        if not self._statement(options).upper().startswith("SELECT "):
            found.append(("statement", Message("pulse runs one SELECT.", "pulse.statement")))
        return found

    @staticmethod
    def _statement(options: RunOptions) -> str:
        return str(options.extra_values.get("statement") or "SELECT 1")

    def run_args(self, program: str, target: ConnectionTarget, options: RunOptions) -> list[str]:
        psql = shutil.which("psql") or "/usr/bin/psql"
        return [
            program,
            "-c",
            PROGRAM,
            *(target.host, str(target.port), target.user, target.dbname),
            *(str(options.duration_s), str(options.progress_interval_s), psql, self._statement(options)),
        ]

    def reader(self, options: RunOptions) -> PulseReader:
        return PulseReader(options)


engines.register(Pulse())
