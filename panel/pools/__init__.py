"""Connection pools: PgBouncer configuration rendering and supervision."""
