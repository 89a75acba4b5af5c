/*
 * reserved_roles.c: the roles only a superuser may grant, revoke, alter or
 * drop, from pgpanel_guard.reserved_roles (which only the server's
 * configuration file sets): the predefined roles that reach the operating
 * system, and the panel's own. Here: the setting, whether a role is reserved
 * or holds a reserved one, and the refusal to touch one. The role guard's
 * other files (role_guard.h) and subscription_guard.c ask here.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "utils/acl.h"
#include "utils/guc.h"

#include "name_list.h"
#include "pgpanel_guard.h"
#include "role_guard.h"

#define DEFAULT_RESERVED_ROLES \
	"pg_execute_server_program, pg_read_server_files, pg_write_server_files"

static char *reserved_roles = NULL;
static NameList *reserved_role_list = NULL;

static void
assign_reserved_roles(const char *newval, void *extra)
{
	reserved_role_list = (NameList *) extra;
}

/* Whether a role is reserved (NULL, for PUBLIC, is not). */
bool
role_is_reserved(const char *role)
{
	return name_listed(reserved_role_list, role);
}

/* The first reserved role the role is a member of (and would hand on), else NULL. */
const char *
reserved_role_held_by(Oid roleid)
{
	int			i;

	for (i = 0; reserved_role_list != NULL && i < reserved_role_list->count; i++)
	{
		const char *reserved = NameStr(reserved_role_list->names[i]);
		Oid			reservedid = get_role_oid(reserved, true);

		if (OidIsValid(reservedid) && is_member_of_role_nosuper(roleid, reservedid))
			return reserved;
	}
	return NULL;
}

/* The name a RoleSpec stands for; NULL for PUBLIC (which is no role). */
const char *
rolespec_name(const RoleSpec *spec)
{
	if (spec == NULL || spec->roletype == ROLESPEC_PUBLIC)
		return NULL;
	if (spec->roletype == ROLESPEC_CSTRING)
		return spec->rolename;
	return get_rolespec_name(spec);
}

/* ALTER, DROP, RENAME...: the role itself must not be reserved. */
void
refuse_reserved_target(const char *role, const char *action)
{
	if (role_is_reserved(role))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to %s role \"%s\"", action, role),
				 RESERVED_DETAIL(role),
				 ONLY_SUPERUSER_HINT));
}

void
reserved_roles_define_settings(void)
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
