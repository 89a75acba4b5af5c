"""Backups: archiving (``archiving``), backups (``backups``), restores and forks (``restore``)."""
