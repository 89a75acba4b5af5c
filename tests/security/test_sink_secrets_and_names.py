"""Issue 37, item 7 (first two parts).

Was: a ``database:read`` token without ``database:view_credentials`` read every log sink's TLS
private key and the password in an Elasticsearch URL; and sink names, ``index_prefix`` and
``sd`` ending in a line break were accepted (``re.match`` with ``$``: ``$`` matches before a
final newline), as were such names of a migration's source.

Now a sink's secrets are shown only with ``database:view_credentials`` (as clusters'
passwords), and every validator matches the whole string. Replayed through the API beside the
legitimate action (the token with the scope sees the secrets; a name without the line break is
taken), with a unit test per validator.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from panel.api import services as api_services
from panel.api.models import Scope
from panel.backups.engine import runner
from panel.clusters.lib import hosts
from panel.clusters.models import Cluster, ClusterStatus
from panel.logsink.lib import config as sink_config
from panel.logsink.lib import formats
from panel.logsink.models import LogSink
from panel.logsink.services import sinks
from panel.migrate.lib import source as source_lib
from panel.quotas.services import measure

KEY = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIKEYMATERIAL\n-----END PRIVATE KEY-----\n"
CERT = "-----BEGIN CERTIFICATE-----\nMIIBCERT\n-----END CERTIFICATE-----\n"
# A public address no node has: no DNS, no connection at save time.
PUBLIC = "203.0.113.8"


@pytest.fixture
def cluster(owner: User) -> Cluster:
    return Cluster.objects.create(
        owner=owner, name="target", version="15", status=ClusterStatus.ONLINE, port=1
    )


def _get(cluster: Cluster, path: str, scopes: list[str]) -> dict[str, Any]:
    token = api_services.create_token(cluster.owner, "t", scopes)[1]
    response = Client().get(
        f"/v2/databases/{cluster.pk}/logsink{path}", headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.django_db
def test_a_read_token_does_not_see_sink_secrets(cluster: Cluster) -> None:
    tls = sinks.create_sink(
        cluster, name="tls", sink_type="rsyslog",
        config={"server": PUBLIC, "port": 6514, "tls": True, "cert": CERT, "key": KEY},
    )  # fmt: skip
    search = sinks.create_sink(
        cluster, name="search", sink_type="elasticsearch",
        config={"url": f"https://elastic:s3cret-pw@{PUBLIC}:9200/base", "index_prefix": "pg"},
    )  # fmt: skip
    read = [Scope.READ.value]
    listed = json.dumps(_get(cluster, "", read))
    one = json.dumps([_get(cluster, f"/{tls.pk}", read), _get(cluster, f"/{search.pk}", read)])
    for shown in (listed, one):
        assert "KEYMATERIAL" not in shown and "s3cret-pw" not in shown
        assert f"https://elastic@{PUBLIC}:9200/base" in shown and "MIIBCERT" in shown
    # Beside it: a token that may see credentials sees them.
    full = _get(cluster, f"/{tls.pk}", [Scope.READ.value, Scope.VIEW_CREDENTIALS.value])
    assert full["config"]["key"] == KEY
    full = _get(cluster, f"/{search.pk}", [Scope.READ.value, Scope.VIEW_CREDENTIALS.value])
    assert full["config"]["url"] == f"https://elastic:s3cret-pw@{PUBLIC}:9200/base"


def _create(cluster: Cluster, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    token = api_services.create_token(cluster.owner, "t", [Scope.READ.value, Scope.CREATE.value])[1]
    response = Client().post(
        f"/v2/databases/{cluster.pk}/logsink",
        data=json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    return response.status_code, response.json()


@pytest.mark.django_db
def test_names_and_values_ending_in_a_line_break_are_refused(cluster: Cluster) -> None:
    syslog = {"server": PUBLIC, "port": 514}
    refused = [
        ({"sink_name": "syslog\n", "sink_type": "rsyslog", "config": syslog}, "logsink.name_invalid"),
        ({"sink_name": "es", "sink_type": "elasticsearch",
          "config": {"url": f"http://{PUBLIC}:9200", "index_prefix": "pg\n"}}, "logsink.config_invalid"),
        ({"sink_name": "sd", "sink_type": "rsyslog",
          "config": {**syslog, "sd": '[auth@1 token="x"]\n'}}, "logsink.config_invalid"),
        ({"sink_name": "line", "sink_type": "rsyslog",
          "config": {**syslog, "format": "custom", "logline": "%msg%\nSET pwned 1"}}, "logsink.config_invalid"),
    ]  # fmt: skip
    for body, code in refused:
        status, answer = _create(cluster, body)
        assert (status, answer["id"]) == (422, code), body
    assert not LogSink.objects.filter(cluster=cluster).exists()
    # Beside it: the same values without the line break are taken.
    status, answer = _create(cluster, {"sink_name": "syslog", "sink_type": "rsyslog",
                                       "config": {**syslog, "sd": '[auth@1 token="x"]'}})  # fmt: skip
    assert status == 201, answer
    status, answer = _create(cluster, {"sink_name": "es", "sink_type": "elasticsearch",
                                       "config": {"url": f"http://{PUBLIC}:9200", "index_prefix": "pg"}})  # fmt: skip
    assert status == 201, answer


# One case per validator: (what it checks, a call that must refuse "…\n", the same without it).
def _sink_config(**config: Any) -> Any:
    return lambda: sink_config.check("rsyslog", {"server": "h", "port": 514, **config})


VALIDATORS = {
    "sink name": (lambda: sink_config.check_name("name\n"), lambda: sink_config.check_name("name")),
    "sink server": (_sink_config(server="h\n"), _sink_config(server="h")),
    "sink sd": (_sink_config(sd="[a@1 b=\"c\"]\n"), _sink_config(sd="[a@1 b=\"c\"]")),
    "sink logline": (_sink_config(format="custom", logline="%msg%\n"),
                     _sink_config(format="custom", logline="%msg%")),
    "index prefix": (lambda: sink_config.check("opensearch", {"url": "http://h", "index_prefix": "pg\n"}),
                     lambda: sink_config.check("opensearch", {"url": "http://h", "index_prefix": "pg"})),
    "migration name": (lambda: source_lib.check_name("name\n", "dbname"),
                       lambda: source_lib.check_name("name", "dbname")),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(VALIDATORS))
def test_each_validator_refuses_a_final_line_break(name: str) -> None:
    refused, taken = VALIDATORS[name]
    with pytest.raises(ValueError):
        refused()
    taken()


def test_a_host_comes_back_without_its_line_break() -> None:
    # validate_host trims the text and returns the canonical host, which is what is used.
    assert hosts.validate_host("db.example\n") == "db.example"
    with pytest.raises(hosts.InvalidHost):
        hosts.validate_host("db\n.example")


def test_names_read_from_disk_are_matched_whole(tmp_path: Path) -> None:
    assert runner._FULL_LABEL.fullmatch("20260101-000000F")
    assert not runner._FULL_LABEL.fullmatch("20260101-000000F\n")
    (tmp_path / "16384").write_bytes(b"x" * 10)
    (tmp_path / "16385\n").write_bytes(b"x" * 20)
    assert measure._file_sizes(str(tmp_path)) == {16384: 10}


def test_no_control_character_of_a_record_reaches_a_syslog_line() -> None:
    record = formats.Record(
        timestamp="2026-11-25 18:00:00 UTC", host="db", app="postgresql", pid="1", level="WARNING",
        user="doadmin", database="defaultdb", message="x\n\tSET pwned 1\r\nEND\x00",
    )  # fmt: skip
    for fmt, logline in (("rfc5424", None), ("rfc3164", None), ("custom", "%msg% %structured-data%")):
        line = formats.syslog_line(record, fmt, logline=logline, sd='[a@1 b="c"]')
        assert not re.search(r"[\x00-\x1f\x7f]", line), line
        assert "x#012#011SET pwned 1#015#012END#000" in line
    # Elasticsearch/OpenSearch: JSON writes the line break as \n, one document per line.
    body = formats.bulk_body([record], "pg", dt.date(2026, 11, 25))
    assert body.count(b"\n") == 2
