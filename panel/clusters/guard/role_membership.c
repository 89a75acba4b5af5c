/*
 * role_membership.c: the role guard's checks of memberships and attributes.
 * On PostgreSQL 15 a CREATEROLE role may grant itself any non-superuser role,
 * pg_execute_server_program and pg_read_server_files included: refused are
 *
 *  - membership changes involving a reserved role on either side (GRANT,
 *    REVOKE, CREATE ROLE ... IN ROLE / ROLE / ADMIN, ALTER GROUP), and
 *    granting a role that is itself a member of a reserved role;
 *  - CREATE/ALTER ROLE with SUPERUSER, REPLICATION or BYPASSRLS.
 */
#include "postgres.h"

#include "commands/defrem.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "utils/acl.h"

#include "pgpanel_guard.h"
#include "role_guard.h"

/* A role whose membership is given or taken away. */
static void
check_granted_role(const char *role, bool is_grant)
{
	Oid			roleid;
	const char *reserved;

	if (role == NULL)
		return;
	if (role_is_reserved(role))
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
	reserved = reserved_role_held_by(roleid);
	if (reserved != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to grant role \"%s\"", role),
				 errdetail("Role \"%s\" is a member of \"%s\", which is reserved by the control panel.",
						   role, reserved),
				 ONLY_SUPERUSER_HINT));
}

/* A role that gains or loses a membership. */
static void
check_member_role(const char *role)
{
	if (role_is_reserved(role))
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

void
check_grant_role(GrantRoleStmt *stmt)
{
	ListCell   *cell;

	foreach(cell, stmt->granted_roles)
	{
		AccessPriv *priv = lfirst_node(AccessPriv, cell);

		check_granted_role(priv->priv_name, stmt->is_grant);
	}
	check_member_list(stmt->grantee_roles);
	if (stmt->grantor != NULL && role_is_reserved(rolespec_name(stmt->grantor)))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to name role \"%s\" as grantor",
						rolespec_name(stmt->grantor)),
				 RESERVED_DETAIL(rolespec_name(stmt->grantor)),
				 ONLY_SUPERUSER_HINT));
}

void
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

void
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
