"""Who PostgreSQL, PgBouncer and pgbench run as: the options every spawn takes from ``OsUser``."""

from __future__ import annotations

import os
import subprocess

import pytest

from panel.clusters.engine.postgres import OsUser, os_user


def test_ourselves_needs_no_switch() -> None:
    assert OsUser("me", os.geteuid(), os.getegid(), "/home/me").spawn_options() == {}


def test_another_user_gets_its_ids_and_none_of_our_groups() -> None:
    other = OsUser("postgres", os.geteuid() + 1, 4242, "/var/lib/postgresql")
    assert other.spawn_options() == {"user": os.geteuid() + 1, "group": 4242, "extra_groups": []}


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can start a program as another user")
def test_a_spawned_program_runs_as_the_runner_without_roots_groups() -> None:
    user = os_user()

    def run(flag: str) -> list[int]:
        out = subprocess.run(["id", flag], capture_output=True, text=True, check=True, **user.spawn_options())
        return [int(n) for n in out.stdout.split()]

    assert run("-u") == [user.uid] and user.uid != 0
    assert run("-G") == [user.gid]  # root's supplementary groups are dropped
