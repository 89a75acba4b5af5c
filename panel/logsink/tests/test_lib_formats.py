"""The records a sink receives, written exactly (pure): RFC 5424, RFC 3164, a custom template,
octet-counted frames, an Elasticsearch _bulk body; and the configuration checks."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from panel.logsink.lib import config, formats

RECORD = formats.Record(
    timestamp="2026-11-25 18:00:00.123 UTC",
    host="db-test",
    app="postgresql",
    pid="4242",
    level="ERROR",
    user="doadmin",
    database="defaultdb",
    message="division by zero\nSTATEMENT:  SELECT 1/0",
)


def test_rfc5424_line() -> None:
    assert formats.rfc5424(RECORD, '[auth@1 token="x"]') == (
        '<131>1 2026-11-25T18:00:00.123Z db-test postgresql 4242 ERROR [auth@1 token="x"] '
        "division by zero\nSTATEMENT:  SELECT 1/0"
    )


def test_rfc3164_line() -> None:
    assert formats.rfc3164(RECORD).startswith(
        "<131>Nov 25 18:00:00 db-test postgresql[4242]: division by zero"
    )


def test_custom_line_and_unknown_properties() -> None:
    line = formats.custom(RECORD, "<%pri%>%timestamp:::date-rfc3339% %HOSTNAME% %app-name%: %msg%")
    assert line.startswith("<131>2026-11-25T18:00:00.123Z db-test postgresql: division by zero")
    assert formats.unknown_properties("%msg% %exec% %HOSTNAME%") == ["exec"]


def test_octet_frame_counts_bytes() -> None:
    assert formats.octet_frame("héllo\nworld") == b"12 h\xc3\xa9llo\nworld"


def test_bulk_body_names_the_days_index() -> None:
    lines = formats.bulk_body([RECORD], "pg", dt.date(2030, 1, 1)).decode().splitlines()
    assert json.loads(lines[0]) == {"index": {"_index": "pg-2026.11.25"}}
    doc = json.loads(lines[1])
    assert doc["cluster"] == "db-test" and doc["@timestamp"] == "2026-11-25T18:00:00.123Z"
    assert doc["level"] == "ERROR" and doc["database"] == "defaultdb"


def test_a_stamp_with_an_offset_is_read() -> None:
    assert formats.instant("2026-11-25 18:00:00+0100") == dt.datetime(2026, 11, 25, 17, 0, tzinfo=dt.UTC)
    assert formats.instant("garbage") is None


@pytest.mark.parametrize(
    ("sink_type", "settings", "field"),
    [
        ("rsyslog", {"server": "h", "port": 0}, "port"),
        ("rsyslog", {"server": "a b", "port": 514}, "server"),
        ("rsyslog", {"server": "h", "port": 514, "format": "custom"}, "logline"),
        ("rsyslog", {"server": "h", "port": 514, "sd": "no brackets"}, "sd"),
        ("rsyslog", {"server": "h", "port": 514, "cert": "-----BEGIN CERTIFICATE-----"}, "key"),
        ("elasticsearch", {"url": "ftp://h", "index_prefix": "p"}, "url"),
        ("elasticsearch", {"url": "http://h/a b\r\nX-Evil: 1", "index_prefix": "p"}, "url"),
        ("opensearch", {"url": "https://h", "index_prefix": "Upper"}, "index_prefix"),
        ("opensearch", {"url": "https://h", "index_prefix": "p", "timeout": 0}, "timeout"),
    ],
)
def test_config_refusals_name_their_field(sink_type: str, settings: dict, field: str) -> None:
    with pytest.raises(config.InvalidSink) as refused:
        config.check(sink_type, settings)
    assert refused.value.field == field


def test_config_defaults_and_destination() -> None:
    normal = config.check("elasticsearch", {"url": "https://u:p@es.example:9243/base", "index_prefix": "pg"})
    assert normal["index_days_max"] == 7 and normal["timeout"] == 10
    assert config.destination("elasticsearch", normal) == ("es.example", 9243, True)
    assert config.check("rsyslog", {"server": "h", "port": 514})["format"] == "rfc5424"


def test_expired_indices_are_the_prefixs_old_days_only() -> None:
    names = ["pg-2026.11.01", "pg-2026.11.20", "pg-2026.13.01", "pgx-2026.01.01", "pg-latest"]
    assert formats.expired_indices(names, "pg", dt.date(2026, 11, 27), 7) == ["pg-2026.11.01"]
