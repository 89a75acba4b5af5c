"""The readers of one collection, one module per source: PostgreSQL, the host, PgBouncer."""
