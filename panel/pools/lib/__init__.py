"""Django-free helpers for PgBouncer: ini rendering, auth file, admin console parsing."""
