"""Who PostgreSQL, PgBouncer and pgbench run as: the options every spawn takes from ``OsUser``."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

import pytest

from panel.clusters.engine.postgres import chown_tree
from panel.core.runas import EngineError, OsUser, make_private_dir, os_user, os_user_named, run_as


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


def test_a_cluster_without_a_user_of_its_own_runs_as_the_global_runner() -> None:
    assert os_user_named("") == os_user()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs clusters as users of their own")
def test_a_missing_cluster_user_is_an_error_that_says_what_to_do() -> None:
    with pytest.raises(EngineError, match="does not exist.*Delete the cluster"):
        os_user_named("pgc-00000000")


def test_programs_create_private_files() -> None:
    user = os_user()
    # Not pytest's tmp_path: the runner user must enter the directory.
    directory = Path(tempfile.mkdtemp(prefix="pgpanel-umask-", dir="/tmp"))
    try:
        make_private_dir(directory, user)
        target = directory / "made"
        assert run_as(user, ["touch", str(target)], timeout=10).returncode == 0
        assert stat.S_IMODE(target.stat().st_mode) == 0o600
    finally:
        shutil.rmtree(directory)


def test_chown_tree_takes_every_right_of_group_and_others_away(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "file").write_text("x")
    (root / "sub" / "file").chmod(0o644)
    (root / "sub").chmod(0o755)
    (root / "link").symlink_to("/etc/hostname")
    user = os_user()
    chown_tree(root, user)
    for path in (root, root / "sub", root / "sub" / "file", root / "link"):
        st = path.lstat()
        assert st.st_uid == user.uid, path
        if not stat.S_ISLNK(st.st_mode):
            assert stat.S_IMODE(st.st_mode) & 0o077 == 0, path
    assert stat.S_IMODE(Path("/etc/hostname").stat().st_mode) & 0o044  # a link's target is left alone
