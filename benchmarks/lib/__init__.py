"""Django-free helpers for pgbench: command lines, output parsing, transaction logs."""
