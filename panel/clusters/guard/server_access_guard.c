/*
 * server_access_guard.c: the role guard's refusal of the statements that reach
 * the operating system: ALTER SYSTEM (the server's configuration), COPY to or
 * from a program or a file on the server, LOAD (a library into the server).
 */
#include "postgres.h"

#include "nodes/parsenodes.h"

#include "role_guard.h"

static void
check_copy(CopyStmt *stmt)
{
	if (stmt->is_program)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to COPY to or from an external program"),
				 errdetail("Running programs on the database server is reserved by the control panel."),
				 errhint("Use COPY ... FROM STDIN or COPY ... TO STDOUT (psql's \\copy) instead.")));
	if (stmt->filename != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to COPY to or from a file on the server"),
				 errdetail("Reading and writing server files is reserved by the control panel."),
				 errhint("Use COPY ... FROM STDIN or COPY ... TO STDOUT (psql's \\copy) instead.")));
}

/* role_guard.c, on ALTER SYSTEM, COPY and LOAD by a role that is not superuser. */
void
guard_server_access(Node *node)
{
	switch (nodeTag(node))
	{
		case T_AlterSystemStmt:
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied to run ALTER SYSTEM"),
					 errdetail("The server's configuration is managed by the control panel."),
					 ONLY_SUPERUSER_HINT));
			break;
		case T_CopyStmt:
			check_copy((CopyStmt *) node);
			break;
		case T_LoadStmt:
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied to load library \"%s\"",
							((LoadStmt *) node)->filename),
					 errdetail("Loading libraries into the server is reserved by the control panel."),
					 errhint("Use CREATE EXTENSION with a trusted extension instead.")));
			break;
		default:
			break;
	}
}
