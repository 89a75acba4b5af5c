"""The PgBouncer configurations ``pool_cost.py`` compares the panel's with: a hand-written one, and
the fastest found by ``--explore`` with the candidates it tried. Text only."""

from __future__ import annotations

# PgBouncer settings a person writes in a minimal file; everything else is PgBouncer's default.
HAND = """\
[databases]
{name} = host=127.0.0.1 port={server_port} dbname={dbname} pool_size={pool_size}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir = {socket_dir}
pidfile = {pidfile}
logfile = {logfile}
auth_type = scram-sha-256
auth_file = {auth_file}
pool_mode = transaction
max_client_conn = 1000
ignore_startup_parameters = extra_float_digits
client_tls_sslmode = require
client_tls_key_file = {tls_key}
client_tls_cert_file = {tls_cert}
server_tls_sslmode = require
"""

# "best": SOCKET_BASE (the server over its Unix socket with peer authentication: no TCP, no TLS and
# no SCRAM towards the server; TLS only where the clients are) plus BEST_SETTINGS, in BEST_PROCESSES
# processes. Chosen with --explore on the 2-core machine while it was shared (load ~12): the socket
# was the one large win (hand-written over TCP+TLS cost 1.3–2× the CPU per transaction); among the
# candidates below no difference rose above the noise, and the quiet log (no line per login and
# logout) is kept because it removes work per connection without losing anything; so_reuseport
# with 2 processes showed no gain where PgBouncer shares 2 cores with pgbench and PostgreSQL.
# Rerun --explore on a quiet machine (or one with cores to spare) before changing it.
BEST_SETTINGS: dict[str, str] = {"log_connections": "0", "log_disconnections": "0"}
BEST_PROCESSES = 1

# name -> (settings added to the "socket" baseline, PgBouncer processes sharing the port).
CANDIDATES: dict[str, tuple[dict[str, str], int]] = {
    "socket": ({}, 1),
    "socket-quiet": ({"log_connections": "0", "log_disconnections": "0"}, 1),
    "socket-pkt16k": ({"pkt_buf": "16384"}, 1),
    "socket-loop0": ({"sbuf_loopcnt": "0"}, 1),
    "socket-tls12-aes128": (
        {"client_tls_protocols": "tlsv1.2", "client_tls_ciphers": "ECDHE-ECDSA-AES128-GCM-SHA256"},
        1,
    ),
    "socket-nodefer": ({"tcp_defer_accept": "0"}, 1),
    "socket-reuseport2": ({"so_reuseport": "1"}, 2),
    "socket-quiet-reuseport2": ({"so_reuseport": "1", "log_connections": "0", "log_disconnections": "0"}, 2),
}

SOCKET_BASE = """\
[databases]
{name} = host={server_socket_dir} port={server_port} dbname={dbname} pool_size={pool_size}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir = {socket_dir}
unix_socket_mode = 0700
pidfile = {pidfile}
logfile = {logfile}
auth_type = scram-sha-256
auth_file = {auth_file}
pool_mode = transaction
max_client_conn = 1000
ignore_startup_parameters = extra_float_digits
client_tls_sslmode = require
client_tls_key_file = {tls_key}
client_tls_cert_file = {tls_cert}
server_tls_sslmode = disable
"""
