/*
 * measure_guard.c: refuses, for every role but a superuser, what would only
 * blind the panel's measurement of a tenant's storage (which reads each
 * database's catalogue as the panel's monitor role):
 *
 *  - ALTER DATABASE ... IS_TEMPLATE or ALLOW_CONNECTIONS, and CREATE DATABASE
 *    ... IS_TEMPLATE true or ALLOW_CONNECTIONS false: a database closed to
 *    connections cannot be read, and a template could be copied unseen;
 *  - ALTER DATABASE / ROLE ... SET local_preload_libraries or
 *    session_preload_libraries: a library that cannot be loaded makes every
 *    new session of that database or role fail (RESET stays allowed).
 *
 * Other per-database and per-role settings stay the tenant's: the panel's
 * sessions override them with their own startup options.
 */
#include "postgres.h"

#include "commands/defrem.h"
#include "nodes/parsenodes.h"

#include "pgpanel_guard.h"

#define MEASURE_DETAIL \
	errdetail("The control panel must be able to measure every database and connect as every role.")
#define MEASURE_HINT \
	errhint("Only the control panel's superuser may do this.")

static void
refuse_database_option(const char *option)
{
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied to set the %s option of a database", option),
			 MEASURE_DETAIL,
			 MEASURE_HINT));
}

/* ALTER DATABASE: any change of either option; CREATE DATABASE: only what differs from the default. */
static void
check_database_options(List *options, bool creating)
{
	ListCell   *cell;

	foreach(cell, options)
	{
		DefElem    *opt = lfirst_node(DefElem, cell);

		if (strcmp(opt->defname, "is_template") == 0 && (!creating || defGetBoolean(opt)))
			refuse_database_option("IS_TEMPLATE");
		if (strcmp(opt->defname, "allow_connections") == 0 && (!creating || !defGetBoolean(opt)))
			refuse_database_option("ALLOW_CONNECTIONS");
	}
}

static void
check_set(const VariableSetStmt *set)
{
	if (set == NULL || set->name == NULL || set->kind != VAR_SET_VALUE)
		return;
	if (strcmp(set->name, "local_preload_libraries") == 0 ||
		strcmp(set->name, "session_preload_libraries") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to set parameter \"%s\"", set->name),
				 errdetail("Libraries loaded into sessions are reserved by the control panel."),
				 MEASURE_HINT));
}

bool
is_measure_guarded(Node *node)
{
	switch (nodeTag(node))
	{
		case T_AlterDatabaseStmt:
		case T_CreatedbStmt:
		case T_AlterDatabaseSetStmt:
		case T_AlterRoleSetStmt:
			return true;
		default:
			return false;
	}
}

void
guard_measurement(Node *node)
{
	switch (nodeTag(node))
	{
		case T_AlterDatabaseStmt:
			check_database_options(((AlterDatabaseStmt *) node)->options, false);
			break;
		case T_CreatedbStmt:
			check_database_options(((CreatedbStmt *) node)->options, true);
			break;
		case T_AlterDatabaseSetStmt:
			check_set(((AlterDatabaseSetStmt *) node)->setstmt);
			break;
		case T_AlterRoleSetStmt:
			check_set(((AlterRoleSetStmt *) node)->setstmt);
			break;
		default:
			break;
	}
}
