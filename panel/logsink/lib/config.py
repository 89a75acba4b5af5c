"""A log sink's type and configuration, as the managed service's logsink API has them, checked
and normalised (pure, no Django).

rsyslog: ``server``, ``port``, ``tls``, ``format`` (``rfc5424``, ``rfc3164`` or ``custom`` with
``logline``), ``sd`` (RFC 5424 structured data), ``ca``/``cert``/``key`` (PEM, for TLS).
elasticsearch and opensearch: ``url`` (http or https, credentials in it allowed), ``index_prefix``,
``index_days_max``, ``timeout`` (seconds), ``ca``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from panel.core.errors import N_, CodedError
from panel.logsink.lib import formats

RSYSLOG = "rsyslog"
ELASTICSEARCH = "elasticsearch"
OPENSEARCH = "opensearch"
TYPES = (RSYSLOG, ELASTICSEARCH, OPENSEARCH)
FORMATS = ("rfc5424", "rfc3164", "custom")
_KEYS = {
    RSYSLOG: {"server", "port", "tls", "format", "logline", "sd", "ca", "cert", "key"},
    ELASTICSEARCH: {"url", "index_prefix", "index_days_max", "timeout", "ca"},
    OPENSEARCH: {"url", "index_prefix", "index_days_max", "timeout", "ca"},
}
# Every value is matched whole (re.fullmatch): "$" would let a final line break through to
# the frames the values end up in; a custom log line holds no control character either.
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
_INDEX_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,99}")
_SERVER_RE = re.compile(r"[A-Za-z0-9.:_-]{1,253}")
_SD_RE = re.compile(r"(\[[^\]\x00-\x1f\x7f]{1,500}\])+")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
MAX_PEM = 20000


class InvalidSink(CodedError, ValueError):
    """A value of a sink that cannot be used, naming its field."""

    def __init__(
        self, message: str, field: str, code: str = "logsink.config_invalid", **params: object
    ) -> None:
        super().__init__(message, field=field, code=code, params=params)


def check_name(name: object) -> str:
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        raise InvalidSink(
            N_(
                "A sink name is 1 to 63 letters, digits, dots, underscores and hyphens, starting with a letter or digit."
            ),
            "sink_name",
            "logsink.name_invalid",
        )
    return name


def _bad(key: str) -> InvalidSink:
    return InvalidSink(N_("The value of “%(key)s” is not valid for this sink."), key, key=key)


def _pem(config: Mapping[str, Any], key: str, marker: str) -> str | None:
    value = config.get(key)
    if value in (None, ""):
        return None
    if not isinstance(value, str) or len(value) > MAX_PEM or f"-----BEGIN {marker}" not in value:
        raise _bad(key)
    return value


def check(sink_type: object, config: object) -> dict[str, Any]:
    """The configuration normalised (defaults filled in); InvalidSink naming the first problem."""
    if sink_type not in TYPES:
        raise InvalidSink(
            N_("A sink's type is rsyslog, elasticsearch or opensearch."), "sink_type", "logsink.type_invalid"
        )
    if not isinstance(config, Mapping):
        raise InvalidSink(N_("A sink's config is an object."), "config")
    unknown = sorted(set(config) - _KEYS[str(sink_type)])
    if unknown:
        raise InvalidSink(
            N_("“%(key)s” is not a setting of this sink."),
            unknown[0],
            "logsink.config_unknown",
            key=unknown[0],
        )
    return _rsyslog(config) if sink_type == RSYSLOG else _http(config)


def _rsyslog(config: Mapping[str, Any]) -> dict[str, Any]:
    server, port = config.get("server"), config.get("port")
    if not isinstance(server, str) or not _SERVER_RE.fullmatch(server):
        raise _bad("server")
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
        raise _bad("port")
    tls = config.get("tls", False)
    if not isinstance(tls, bool):
        raise _bad("tls")
    fmt = config.get("format", "rfc5424")
    if fmt not in FORMATS:
        raise _bad("format")
    logline = config.get("logline")
    if fmt == "custom":
        if not isinstance(logline, str) or not logline or len(logline) > 1000 or _CONTROL_RE.search(logline):
            raise _bad("logline")
        if formats.unknown_properties(logline):
            raise InvalidSink(
                N_("The log line names “%(property)s”, which is not a property the panel fills in."),
                "logline",
                property=formats.unknown_properties(logline)[0],
            )
    elif logline not in (None, ""):
        raise _bad("logline")
    sd = config.get("sd")
    if sd not in (None, "") and (not isinstance(sd, str) or not _SD_RE.fullmatch(sd)):
        raise _bad("sd")
    result: dict[str, Any] = {"server": server, "port": port, "tls": tls, "format": fmt}
    if fmt == "custom":
        result["logline"] = logline
    if sd:
        result["sd"] = sd
    for key, marker in (("ca", "CERTIFICATE"), ("cert", "CERTIFICATE"), ("key", "")):
        pem = _pem(config, key, marker)
        if pem:
            result[key] = pem
    if ("cert" in result) != ("key" in result):
        raise _bad("key" if "cert" in result else "cert")
    return result


def _http(config: Mapping[str, Any]) -> dict[str, Any]:
    url = config.get("url")
    if not isinstance(url, str) or len(url) > 2000 or any(ord(ch) <= 32 or ord(ch) >= 127 for ch in url):
        raise _bad("url")  # no space or control character can reach the request line
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise _bad("url") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise _bad("url")
    if port is not None and not 1 <= port <= 65535:
        raise _bad("url")
    prefix = config.get("index_prefix")
    if not isinstance(prefix, str) or not _INDEX_RE.fullmatch(prefix):
        raise _bad("index_prefix")
    days = config.get("index_days_max", 7)
    if not isinstance(days, int) or isinstance(days, bool) or not 1 <= days <= 10000:
        raise _bad("index_days_max")
    timeout = config.get("timeout", 10)
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or not 1 <= timeout <= 120:
        raise _bad("timeout")
    result: dict[str, Any] = {"url": url, "index_prefix": prefix, "index_days_max": days, "timeout": timeout}
    ca = _pem(config, "ca", "CERTIFICATE")
    if ca:
        result["ca"] = ca
    return result


def destination(sink_type: str, config: Mapping[str, Any]) -> tuple[str, int, bool]:
    """(host, port, TLS) the sink sends to."""
    if sink_type == RSYSLOG:
        return str(config["server"]), int(config["port"]), bool(config.get("tls"))
    parts = urlsplit(str(config["url"]))
    tls = parts.scheme == "https"
    return str(parts.hostname), int(parts.port or (443 if tls else 80)), tls


# What a sink's configuration holds that only a reader with the right to see credentials sees.
SECRET_KEYS = frozenset({"key"})


def without_secrets(sink_type: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` without its secrets: no private key, and an Elasticsearch/OpenSearch URL with
    its user name but not its password."""
    shown = {key: value for key, value in config.items() if key not in SECRET_KEYS}
    if sink_type != RSYSLOG and "url" in shown:
        parts = urlsplit(str(shown["url"]))
        if parts.password is not None:
            userinfo, host = parts.netloc.rsplit("@", 1)
            user = userinfo.split(":", 1)[0]
            shown["url"] = urlunsplit(parts._replace(netloc=f"{user}@{host}" if user else host))
    return shown
