"""``haproxy -c`` refusing a configuration says why: its ALERT lines, which ``-q`` hid entirely
(a stats socket path one byte over HAProxy's limit of 97 made a refusal that read "HAProxy
refused its configuration: " and nothing else; met on the network-namespace nodes, issue 39)."""

from __future__ import annotations

from pathlib import Path

import pytest

from panel.clusters.standbys.engine import haproxy
from panel.core import runas
from panel.core.runas import EngineError

CONFIG = """global
    stats socket {socket} mode 600 level admin
defaults
    mode tcp
    timeout connect 500ms
    timeout client 1h
    timeout server 1h
listen primary
    bind 127.0.0.1:{port}
    server member-1 127.0.0.1:{port2}
"""


def _config(tmp_path: Path, socket: str) -> Path:
    path = tmp_path / "haproxy.cfg"
    path.write_text(CONFIG.format(socket=socket, port=26998, port2=26999))
    return path


def test_a_refused_configuration_says_why(tmp_path: Path) -> None:
    long = "/" + "s" * 97 + "/haproxy.sock"  # 111 bytes: over HAProxy's 97
    with pytest.raises(
        EngineError, match=r"HAProxy refused its configuration: \[ALERT\].*too long \(max 97\)"
    ):
        haproxy.check(_config(tmp_path, long), runas.current_user(), timeout=10)


def test_an_accepted_configuration_passes(tmp_path: Path) -> None:
    haproxy.check(_config(tmp_path, str(tmp_path / "haproxy.sock")), runas.current_user(), timeout=10)
