"""Online migration's processes: ``schema`` runs pg_dump | pg_restore (the one module that does)."""
