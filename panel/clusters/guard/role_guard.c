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
 */
#include "postgres.h"

#include "commands/defrem.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "pgpanel_guard.h"

#define DEFAULT_RESERVED_ROLES \
	"pg_execute_server_program, pg_read_server_files, pg_write_server_files"

#define RESERVED_DETAIL(role) \
	errdetail("Role \"%s\" is reserved by the control panel.", (role))
#define ONLY_SUPERUSER_HINT \
	errhint("Only the control panel's superuser may do this.")


static char *reserved_roles = NULL;
static NameList *reserved_role_list = NULL;

static void
assign_reserved_roles(const char *newval, void *extra)
{
	reserved_role_list = (NameList *) extra;
}
static bool
is_reserved(const char *role)
{
	return name_listed(reserved_role_list, role);
}

/* The name a RoleSpec stands for; NULL for PUBLIC (which is no role). */
static const char *
rolespec_name(const RoleSpec *spec)
{
	if (spec == NULL || spec->roletype == ROLESPEC_PUBLIC)
		return NULL;
	if (spec->roletype == ROLESPEC_CSTRING)
		return spec->rolename;
	return get_rolespec_name(spec);
}

/* ALTER, DROP, RENAME...: the role itself must not be reserved. */
static void
refuse_reserved_target(const char *role, const char *action)
{
	if (is_reserved(role))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to %s role \"%s\"", action, role),
				 RESERVED_DETAIL(role),
				 ONLY_SUPERUSER_HINT));
}

/* A role whose membership is given or taken away. */
static void
check_granted_role(const char *role, bool is_grant)
{
	int			i;
	Oid			roleid;

	if (role == NULL)
		return;
	if (is_reserved(role))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to %s role \"%s\"",
						is_grant ? "grant" : "revoke", role),
				 RESERVED_DETAIL(role),
				 ONLY_SUPERUSER_HINT));
	if (!is_grant)
		return;
	/* A role that holds a reserved one would hand it on. */
	roleid = get_role_oid(role, true);
	if (!OidIsValid(roleid))
		return;
	for (i = 0; reserved_role_list != NULL && i < reserved_role_list->count; i++)
	{
		const char *reserved = NameStr(reserved_role_list->names[i]);
		Oid			reservedid = get_role_oid(reserved, true);

		if (OidIsValid(reservedid) && is_member_of_role_nosuper(roleid, reservedid))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied to grant role \"%s\"", role),
					 errdetail("Role \"%s\" is a member of \"%s\", which is reserved by the control panel.",
							   role, reserved),
					 ONLY_SUPERUSER_HINT));
	}
}

/* A role that gains or loses a membership. */
static void
check_member_role(const char *role)
{
	if (is_reserved(role))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to change the memberships of role \"%s\"", role),
				 RESERVED_DETAIL(role),
				 ONLY_SUPERUSER_HINT));
}

static void
check_member_list(List *roles)
{
	ListCell   *cell;

	foreach(cell, roles)
		check_member_role(rolespec_name(lfirst_node(RoleSpec, cell)));
}

static void
check_owner(const RoleSpec *spec)
{
	const char *role = rolespec_name(spec);

	if (is_reserved(role))
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

		if (is_reserved(role))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg(is_grant ? "permission denied to grant privileges to role \"%s\""
							: "permission denied to revoke privileges from role \"%s\"",
							role),
					 RESERVED_DETAIL(role),
					 ONLY_SUPERUSER_HINT));
	}
}

/* SUPERUSER, REPLICATION and BYPASSRLS stay the panel's. */
static void
check_role_attributes(List *options, bool creating)
{
	ListCell   *cell;

	foreach(cell, options)
	{
		DefElem    *opt = lfirst_node(DefElem, cell);
		const char *attribute = NULL;

		if (strcmp(opt->defname, "superuser") == 0)
			attribute = "SUPERUSER";
		else if (strcmp(opt->defname, "isreplication") == 0)
			attribute = "REPLICATION";
		else if (strcmp(opt->defname, "bypassrls") == 0)
			attribute = "BYPASSRLS";
		else
			continue;
		/* "CREATE ROLE x NOSUPERUSER" only states the default. */
		if (creating && !defGetBoolean(opt))
			continue;
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 creating ? errmsg("permission denied to create a role with the %s attribute", attribute)
				 : errmsg("permission denied to change the %s attribute of a role", attribute),
				 errdetail("The SUPERUSER, REPLICATION and BYPASSRLS attributes are reserved by the control panel."),
				 ONLY_SUPERUSER_HINT));
	}
}

static void
check_grant_role(GrantRoleStmt *stmt)
{
	ListCell   *cell;

	foreach(cell, stmt->granted_roles)
	{
		AccessPriv *priv = lfirst_node(AccessPriv, cell);

		check_granted_role(priv->priv_name, stmt->is_grant);
	}
	check_member_list(stmt->grantee_roles);
	if (stmt->grantor != NULL && is_reserved(rolespec_name(stmt->grantor)))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to name role \"%s\" as grantor",
						rolespec_name(stmt->grantor)),
				 RESERVED_DETAIL(rolespec_name(stmt->grantor)),
				 ONLY_SUPERUSER_HINT));
}

static void
check_create_role(CreateRoleStmt *stmt)
{
	ListCell   *cell;

	refuse_reserved_target(stmt->role, "create");
	check_role_attributes(stmt->options, true);
	foreach(cell, stmt->options)
	{
		DefElem    *opt = lfirst_node(DefElem, cell);

		if (strcmp(opt->defname, "addroleto") == 0)
		{
			/* CREATE ROLE x IN ROLE r: x becomes a member of r. */
			ListCell   *r;

			foreach(r, (List *) opt->arg)
				check_granted_role(rolespec_name(lfirst_node(RoleSpec, r)), true);
		}
		else if (strcmp(opt->defname, "rolemembers") == 0 ||
				 strcmp(opt->defname, "adminmembers") == 0)
			check_member_list((List *) opt->arg);
	}
}

static void
check_alter_role(AlterRoleStmt *stmt)
{
	const char *role = rolespec_name(stmt->role);
	ListCell   *cell;

	foreach(cell, stmt->options)
	{
		DefElem    *opt = lfirst_node(DefElem, cell);

		/* ALTER GROUP role ADD|DROP USER members */
		if (strcmp(opt->defname, "rolemembers") == 0)
		{
			check_granted_role(role, stmt->action > 0);
			check_member_list((List *) opt->arg);
		}
	}
	refuse_reserved_target(role, "alter");
	check_role_attributes(stmt->options, false);
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

			if (is_reserved(owner))
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
						 errmsg("permission denied to give ownership to role \"%s\"", owner),
						 RESERVED_DETAIL(owner),
						 ONLY_SUPERUSER_HINT));
		}
	}
}

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
					if (is_reserved(stmt->newname))
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

void
role_guard_define_settings(void)
{
	DefineCustomStringVariable("pgpanel_guard.reserved_roles",
							   "Roles that only a superuser may grant, revoke, alter or drop.",
							   "A comma-separated list of role names, written by the control panel.",
							   &reserved_roles,
							   DEFAULT_RESERVED_ROLES,
							   PGC_SIGHUP,
							   GUC_LIST_INPUT,
							   check_name_list,
							   assign_reserved_roles,
							   NULL);
}
