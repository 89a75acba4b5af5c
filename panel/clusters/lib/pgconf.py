"""Rendering of the panel-managed parts of postgresql.conf and pg_hba.conf (pure, no Django)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServerSettings:
    """What the panel decides about one server; rendered into ``postgresql.auto-panel.conf``."""

    port: int
    listen_addresses: str
    socket_dir: str
    max_connections: int
    superuser_reserved_connections: int
    shared_buffers_bytes: int
    log_dir: str

    def render(self) -> str:
        shared_buffers_kb = self.shared_buffers_bytes // 1024
        lines = [
            "# Written by the control panel; edits here are overwritten.",
            f"port = {self.port}",
            f"listen_addresses = '{self.listen_addresses}'",
            f"unix_socket_directories = '{self.socket_dir}'",
            "unix_socket_permissions = 0700",
            f"max_connections = {self.max_connections}",
            f"superuser_reserved_connections = {self.superuser_reserved_connections}",
            f"shared_buffers = {shared_buffers_kb}kB",
            "password_encryption = 'scram-sha-256'",
            "ssl = on",
            "ssl_cert_file = 'server.crt'",
            "ssl_key_file = 'server.key'",
            "ssl_ca_file = 'ca.crt'",
            "ssl_min_protocol_version = 'TLSv1.2'",
            "logging_collector = on",
            f"log_directory = '{self.log_dir}'",
            "log_filename = 'postgresql.log'",
            "log_file_mode = 0600",
            "log_rotation_size = 10MB",
            "log_line_prefix = '%m [%p] %q%u@%d '",
            "log_timezone = 'UTC'",
            "timezone = 'UTC'",
            "dynamic_shared_memory_type = posix",
        ]
        return "\n".join(lines) + "\n"


def render_hba(superuser: str) -> str:
    """Clients must use TLS and SCRAM over TCP; the panel's superuser only over the socket."""
    return (
        "# Written by the control panel; edits here are overwritten.\n"
        "# TYPE  DATABASE  USER  ADDRESS  METHOD\n"
        f"local   all       {superuser}  scram-sha-256\n"
        "local   all       all           scram-sha-256\n"
        f"host    all       {superuser}  all  reject\n"
        "hostssl all       all           all  scram-sha-256\n"
        "host    all       all           all  reject\n"
    )
