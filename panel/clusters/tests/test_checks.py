"""The start-up check that the PostgreSQL user can reach the data directory."""

from __future__ import annotations

import os
import pwd
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from panel.clusters.checks import check_data_dir, untraversable_ancestors

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to create directories for other users")


@pytest.fixture
def root_tree() -> Iterator[Path]:
    """/tmp/xxx (0755, root) / closed (0700, root) / data (0755, root)."""
    base = Path(tempfile.mkdtemp(prefix="pgpanel-test-check-", dir="/tmp"))
    os.chmod(base, 0o755)
    closed = base / "closed"
    (closed / "data").mkdir(parents=True)
    os.chmod(closed, 0o700)
    os.chmod(closed / "data", 0o755)
    yield base
    os.chmod(closed, 0o755)
    for path in sorted(base.rglob("*"), reverse=True):
        path.rmdir()
    base.rmdir()


@pytest.fixture
def postgres_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("no postgres user on this machine")


@needs_root
def test_a_0700_root_directory_blocks_the_postgres_user(root_tree, postgres_user):
    data = root_tree / "closed" / "data"
    assert untraversable_ancestors(data, postgres_user.pw_uid, postgres_user.pw_gid) == [root_tree / "closed"]


@needs_root
def test_an_open_path_has_no_blocked_ancestor(root_tree, postgres_user):
    os.chmod(root_tree / "closed", 0o711)
    data = root_tree / "closed" / "data"
    assert untraversable_ancestors(data, postgres_user.pw_uid, postgres_user.pw_gid) == []


@needs_root
def test_owner_and_group_bits_apply_to_the_owner_and_the_group(root_tree, postgres_user):
    closed = root_tree / "closed"
    data = closed / "data"
    os.chown(closed, postgres_user.pw_uid, 0)
    assert untraversable_ancestors(data, postgres_user.pw_uid, postgres_user.pw_gid) == []
    os.chmod(closed, 0o070)  # group may enter, the owner may not: Unix checks only the owner bits
    assert untraversable_ancestors(data, postgres_user.pw_uid, postgres_user.pw_gid) == [closed]
    os.chown(closed, 0, postgres_user.pw_gid)
    assert untraversable_ancestors(data, postgres_user.pw_uid, postgres_user.pw_gid) == []
    os.chown(closed, 0, 0)


def test_a_missing_tail_is_not_reported(tmp_path):
    missing = tmp_path / "does" / "not" / "exist"
    assert untraversable_ancestors(missing, os.geteuid(), os.getegid()) == []


@needs_root
def test_the_system_check_names_the_blocked_directory(root_tree, settings, postgres_user):
    settings.PANEL_DATA_DIR = root_tree / "closed" / "data"
    errors = check_data_dir(None)
    assert [error.id for error in errors] == ["clusters.E002"]
    assert str(root_tree / "closed") in errors[0].msg
    assert "'postgres'" in errors[0].msg
    os.chmod(root_tree / "closed", 0o755)
    assert check_data_dir(None) == []


@needs_root
def test_the_system_check_reports_a_missing_run_as_user(settings):
    settings.PANEL_RUN_AS_USER = "no-such-user-pgpanel"
    errors = check_data_dir(None)
    assert [error.id for error in errors] == ["clusters.E001"]
    assert "no-such-user-pgpanel" in errors[0].msg


def test_a_data_directory_too_long_for_haproxys_socket_is_said(settings: Any) -> None:
    """HAProxy refuses a stats socket path over 97 bytes (the namespace journey met it): a data
    directory that makes the panel's longer is a warning at start; the default is fine."""
    from panel.clusters.checks import check_data_dir_length

    settings.PANEL_DATA_DIR = "/var/lib/pgpanel"
    assert check_data_dir_length(None) == []
    settings.PANEL_DATA_DIR = "/srv/" + "d" * 34  # 39 characters: one too many
    (found,) = check_data_dir_length(None)
    assert found.id == "clusters.W014" and "at most 38" in found.msg
    settings.PANEL_DATA_DIR = "/srv/" + "d" * 33
    assert check_data_dir_length(None) == []
