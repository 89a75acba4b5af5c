"""Backups: archiving (``archiving``), backups (``backups``), restores and forks (``restore``), what
clusters call through its hooks (``cluster_hooks``)."""
