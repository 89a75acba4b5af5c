/*
 * role_guard.c: refuses the statements that would let a tenant's admin role
 * (LOGIN CREATEDB CREATEROLE, not superuser) reach the operating system or the
 * control panel's own roles.
 *
 * On PostgreSQL 15 a CREATEROLE role may grant itself any non-superuser role,
 * pg_execute_server_program and pg_read_server_files included, and ALTER or
 * DROP any non-superuser role. This module, loaded through
 * shared_preload_libraries, looks at every utility statement run by a role
 * that is not superuser and refuses:
 *
 *  - membership changes involving a reserved role on either side (GRANT,
 *    REVOKE, CREATE ROLE ... IN ROLE / ROLE / ADMIN, ALTER GROUP), and granting
 *    a role that is itself a member of a reserved role;
 *  - CREATE/ALTER ROLE with SUPERUSER, REPLICATION or BYPASSRLS;
 *  - CREATE, ALTER, ALTER ... SET, RENAME, DROP, COMMENT ON of a reserved role,
 *    REASSIGN OWNED / DROP OWNED naming one, OWNER TO one, object privileges
 *    granted to or revoked from one;
 *  - ALTER SYSTEM, COPY to or from a program or a server file, LOAD.
 *
 * The reserved roles come from pgpanel_guard.reserved_roles, which only the
 * server's configuration file sets. Superusers (the panel's own) are exempt.
 *
 * Here: the statement's dispatch, and what may not be done to a reserved
 * role (alter, rename, drop, comment on, own, take privileges as). The
 * memberships, the attributes and the statements that reach the operating
 * system are in the files role_guard.h names.
 */
#include "postgres.h"

#include "commands/defrem.h"
#include "nodes/parsenodes.h"

#include "pgpanel_guard.h"
#include "role_guard.h"

static void
check_owner(const RoleSpec *spec)
{
	const char *role = rolespec_name(spec);

	if (role_is_reserved(role))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to give ownership to role \"%s\"", role),
				 RESERVED_DETAIL(role),
				 ONLY_SUPERUSER_HINT));
}

static void
check_privilege_grantees(List *grantees, bool is_grant)
{
	ListCell   *cell;

	foreach(cell, grantees)
	{
		const char *role = rolespec_name(lfirst_node(RoleSpec, cell));

		if (role_is_reserved(role))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg(is_grant ? "permission denied to grant privileges to role \"%s\""
							: "permission denied to revoke privileges from role \"%s\"",
							role),
					 RESERVED_DETAIL(role),
					 ONLY_SUPERUSER_HINT));
	}
}

static void
check_alter_default_privileges(AlterDefaultPrivilegesStmt *stmt)
{
	ListCell   *cell;

	foreach(cell, stmt->options)
	{
		DefElem    *opt = lfirst_node(DefElem, cell);

		if (strcmp(opt->defname, "roles") == 0)
		{
			ListCell   *r;

			foreach(r, (List *) opt->arg)
				refuse_reserved_target(rolespec_name(lfirst_node(RoleSpec, r)),
									   "alter default privileges of");
		}
	}
	if (stmt->action != NULL)
		check_privilege_grantees(stmt->action->grantees, stmt->action->is_grant);
}

static void
check_alter_table(AlterTableStmt *stmt)
{
	ListCell   *cell;

	foreach(cell, stmt->cmds)
	{
		AlterTableCmd *cmd = lfirst_node(AlterTableCmd, cell);

		if (cmd->subtype == AT_ChangeOwner)
			check_owner(cmd->newowner);
	}
}

static void
check_createdb(CreatedbStmt *stmt)
{
	ListCell   *cell;

	foreach(cell, stmt->options)
	{
		DefElem    *opt = lfirst_node(DefElem, cell);

		if (strcmp(opt->defname, "owner") == 0 && opt->arg != NULL)
		{
			const char *owner = defGetString(opt);

			if (role_is_reserved(owner))
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
						 errmsg("permission denied to give ownership to role \"%s\"", owner),
						 RESERVED_DETAIL(owner),
						 ONLY_SUPERUSER_HINT));
		}
	}
}

void
guard_statement(Node *node)
{
	switch (nodeTag(node))
	{
		case T_GrantRoleStmt:
			check_grant_role((GrantRoleStmt *) node);
			break;
		case T_CreateRoleStmt:
			check_create_role((CreateRoleStmt *) node);
			break;
		case T_AlterRoleStmt:
			check_alter_role((AlterRoleStmt *) node);
			break;
		case T_AlterRoleSetStmt:
			refuse_reserved_target(rolespec_name(((AlterRoleSetStmt *) node)->role), "alter");
			break;
		case T_DropRoleStmt:
			{
				ListCell   *cell;

				foreach(cell, ((DropRoleStmt *) node)->roles)
					refuse_reserved_target(rolespec_name(lfirst_node(RoleSpec, cell)), "drop");
				break;
			}
		case T_RenameStmt:
			{
				RenameStmt *stmt = (RenameStmt *) node;

				if (stmt->renameType == OBJECT_ROLE)
				{
					refuse_reserved_target(stmt->subname, "rename");
					refuse_logical_role_rename(stmt->subname);
					if (role_is_reserved(stmt->newname))
						ereport(ERROR,
								(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
								 errmsg("permission denied to rename a role to \"%s\"", stmt->newname),
								 RESERVED_DETAIL(stmt->newname),
								 ONLY_SUPERUSER_HINT));
				}
				break;
			}
		case T_CommentStmt:
			{
				CommentStmt *stmt = (CommentStmt *) node;

				if (stmt->objtype == OBJECT_ROLE)
					refuse_reserved_target(strVal(stmt->object), "comment on");
				break;
			}
		case T_ReassignOwnedStmt:
			{
				ReassignOwnedStmt *stmt = (ReassignOwnedStmt *) node;
				ListCell   *cell;

				foreach(cell, stmt->roles)
					refuse_reserved_target(rolespec_name(lfirst_node(RoleSpec, cell)),
										   "reassign objects owned by");
				refuse_reserved_target(rolespec_name(stmt->newrole), "reassign objects to");
				break;
			}
		case T_DropOwnedStmt:
			{
				ListCell   *cell;

				foreach(cell, ((DropOwnedStmt *) node)->roles)
					refuse_reserved_target(rolespec_name(lfirst_node(RoleSpec, cell)),
										   "drop objects owned by");
				break;
			}
		case T_AlterOwnerStmt:
			check_owner(((AlterOwnerStmt *) node)->newowner);
			break;
		case T_AlterTableStmt:
			check_alter_table((AlterTableStmt *) node);
			break;
		case T_CreateSchemaStmt:
			check_owner(((CreateSchemaStmt *) node)->authrole);
			break;
		case T_CreatedbStmt:
			check_createdb((CreatedbStmt *) node);
			break;
		case T_GrantStmt:
			{
				GrantStmt  *stmt = (GrantStmt *) node;

				check_privilege_grantees(stmt->grantees, stmt->is_grant);
				break;
			}
		case T_AlterDefaultPrivilegesStmt:
			check_alter_default_privileges((AlterDefaultPrivilegesStmt *) node);
			break;
		case T_AlterSystemStmt:
		case T_CopyStmt:
		case T_LoadStmt:
			guard_server_access(node);
			break;
		default:
			break;
	}
}

bool
is_guarded(Node *node)
{
	switch (nodeTag(node))
	{
		case T_GrantRoleStmt:
		case T_CreateRoleStmt:
		case T_AlterRoleStmt:
		case T_AlterRoleSetStmt:
		case T_DropRoleStmt:
		case T_RenameStmt:
		case T_CommentStmt:
		case T_ReassignOwnedStmt:
		case T_DropOwnedStmt:
		case T_AlterOwnerStmt:
		case T_AlterTableStmt:
		case T_CreateSchemaStmt:
		case T_CreatedbStmt:
		case T_GrantStmt:
		case T_AlterDefaultPrivilegesStmt:
		case T_AlterSystemStmt:
		case T_CopyStmt:
		case T_LoadStmt:
			return true;
		default:
			return false;
	}
}
