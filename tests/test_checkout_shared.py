"""What the web server reads of the checkout is readable by it (panel/files.py: share_checkout_with_web).

make run as root runs the web server as PANEL_WEB_USER; the German catalogue compiled by a process
of the panel (umask 077) was 0600 root, and every German page a 500. The settings of every start
and `manage.py compilemessages` repair it; the web server itself is replayed in
tests/test_run_script.py.
"""

from __future__ import annotations

import os
import pwd
import stat
from pathlib import Path

from panel import files


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def checkout(tmp_path: Path) -> Path:
    """A catalogue compiled under umask 077, in a directory made under it too, and the source."""
    catalogue = tmp_path / "locale" / "de" / "LC_MESSAGES"
    catalogue.mkdir(parents=True)
    (catalogue / "django.po").write_text('msgid ""\n')
    (catalogue / "django.mo").write_bytes(b"\x95\x04\x12\xde")
    os.chmod(catalogue / "django.po", 0o644)
    os.chmod(catalogue / "django.mo", 0o600)
    os.chmod(catalogue, 0o700)
    cache = tmp_path / "panel" / "__pycache__"
    cache.mkdir(parents=True)
    for directory in (tmp_path / "locale", tmp_path / "locale" / "de", tmp_path / "panel"):
        os.chmod(directory, 0o755)  # as git checks them out (this process's umask is 077)
    (cache / "x.cpython-311.pyc").write_bytes(b"")
    os.chmod(cache / "x.cpython-311.pyc", 0o600)
    return tmp_path


def test_an_unreadable_catalogue_is_made_readable_and_said(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    mo = root / "locale" / "de" / "LC_MESSAGES" / "django.mo"
    assert {path for path, _want in files.web_unreadable(root)} == {mo.parent, mo}

    report = files.share_checkout_with_web(root)

    assert mode(mo) == 0o644 and mode(mo.parent) == 0o755
    assert report.problems == []
    assert any(line.startswith(f"{mo}: mode 0600 changed to 0644") for line in report.repaired)
    assert files.share_checkout_with_web(root).repaired == []  # said once
    # Python's byte-code caches are whoever imported first's; the web reads the source instead.
    assert mode(root / "panel" / "__pycache__" / "x.cpython-311.pyc") == 0o600


def test_a_file_of_another_user_is_refused_with_the_command_that_repairs_it(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    mo = root / "locale" / "de" / "LC_MESSAGES" / "django.mo"
    nobody = pwd.getpwnam("nobody")
    os.chown(mo, nobody.pw_uid, nobody.pw_gid)

    report = files.share_checkout_with_web(root)

    assert mode(mo) == 0o600
    (problem,) = report.problems
    assert f"{mo} has mode 0600 and belongs to 'nobody'" in problem.message
    assert problem.fix.endswith(f"chmod 0644 {mo}")


def test_the_start_check_says_what_it_repaired(tmp_path: Path, settings: object) -> None:
    """What every start runs as root (``check_checkout_shared``): the repair as a warning of
    ``manage.py check`` and make run's output, with who could not read it before."""
    from panel.clusters.checks import check_checkout_shared

    root = checkout(tmp_path)
    mo = root / "locale" / "de" / "LC_MESSAGES" / "django.mo"
    settings.BASE_DIR = root  # type: ignore[attr-defined]
    files.shared_at_start.clear()

    (warning,) = [m for m in check_checkout_shared(None) if str(mo) + ":" in m.msg]

    assert warning.id == "clusters.W012" and warning.msg.startswith(
        f"Repaired: {mo}: mode 0600 changed to 0644"
    )
    assert mode(mo) == 0o644
    assert [m for m in check_checkout_shared(None) if m.id == "clusters.W012"] == []  # said once
