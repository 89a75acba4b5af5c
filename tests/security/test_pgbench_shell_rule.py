"""Row 5 of issue 10, the rule: a pgbench custom script may not run a program.

Before: a custom script holding ``\\shell touch /tmp/x`` (form or ``bench run --file``) created the
file as ``postgres``, the user that runs every cluster. Now ``\\shell`` and ``\\setshell`` are
refused in every spelling pgbench reads, before anything about the cluster is looked at, and scripts
that only talk to the database pass. No cluster here: the same spellings given to the real pgbench,
and the web form, ``manage.py bench`` and the executor refusing them, are in
tests/security/test_pgbench_shell_on_a_cluster.py. Beside the rule, the code's side of it: only the
runner, which runs pgbench as ``PANEL_BENCH_USER``, spawns processes in the benchmarks app.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmarks import services
from benchmarks.lib import pgbench_command as cmd
from benchmarks.lib.pgbench_script_rules import ShellCommand, shell_command_lines, shell_commands
from panel.clusters.models import Cluster
from panel.core.errors import ServiceError
from tests.security.shell_spellings import ALLOWED, REFUSED, REFUSED_IDS, SHELL_MESSAGE

pytestmark = pytest.mark.integration


# --- (a) the rule, on every spelling pgbench reads ----------------------------------------------


@pytest.mark.parametrize(("script", "lines"), [(s, lines) for _n, s, lines, _r in REFUSED], ids=REFUSED_IDS)
def test_the_rule_finds_shell_meta_commands_in_every_spelling(script: str, lines: list[int]) -> None:
    assert shell_command_lines(script.format(target="/tmp/x")) == lines


@pytest.mark.parametrize("script", [s for _n, s in ALLOWED], ids=[n for n, _s in ALLOWED])
def test_the_rule_leaves_scripts_that_only_talk_to_the_database_alone(script: str) -> None:
    assert shell_command_lines(script) == []


def test_the_rule_names_the_command() -> None:
    assert shell_commands("\\SHELL x\n\\setshell v y\n") == [
        ShellCommand(1, "shell"),
        ShellCommand(2, "setshell"),
    ]
    with pytest.raises(ServiceError) as refused:
        services.validate_run(
            Cluster(),  # the rule comes first: nothing about the cluster is looked at
            pool=None,
            database=None,
            user=None,
            options=cmd.RunOptions(clients=1, threads=1, transactions=1),
            custom_script="SELECT 1;\n\\set a 1\n  \\setshell v echo 1\n",
        )
    assert refused.value.field == "custom_script"
    assert refused.value.message == f"Line 3: \\setshell {SHELL_MESSAGE}"


# --- the code's side: pgbench is spawned by the runner alone ----------------------------------


def test_only_the_runner_spawns_processes_in_the_benchmarks_app() -> None:
    root = Path(__file__).resolve().parents[2] / "benchmarks"
    spawning = re.compile(r"\bsubprocess\b|\bos\.(system|popen|exec\w*|spawn\w*|fork)\b|\bPopen\b")
    offenders = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        if "tests" not in path.parts and path.name != "runner.py" and spawning.search(path.read_text())
    ]
    assert offenders == []
