/*
 * role_guard.h: what the role guard's files share. role_guard.c looks at each
 * statement and refuses what would alter, drop, own or take privileges as a
 * reserved role; it calls:
 *
 *  - reserved_roles.c: the reserved roles (pgpanel_guard.reserved_roles), and
 *    the refusal to touch one;
 *  - role_membership.c: memberships given or taken away, and the attributes
 *    that stay the panel's (SUPERUSER, REPLICATION, BYPASSRLS);
 *  - server_access_guard.c: the statements that reach the operating system
 *    (ALTER SYSTEM, COPY to or from a program or a server file, LOAD).
 */
#ifndef PGPANEL_GUARD_ROLE_GUARD_H
#define PGPANEL_GUARD_ROLE_GUARD_H

#include "postgres.h"

#include "nodes/parsenodes.h"

#define RESERVED_DETAIL(role) \
	errdetail("Role \"%s\" is reserved by the control panel.", (role))
#define ONLY_SUPERUSER_HINT \
	errhint("Only the control panel's superuser may do this.")

/* reserved_roles.c (role_is_reserved is in pgpanel_guard.h) */
extern const char *reserved_role_held_by(Oid roleid);
extern const char *rolespec_name(const RoleSpec *spec);
extern void refuse_reserved_target(const char *role, const char *action);

/* role_membership.c */
extern void check_grant_role(GrantRoleStmt *stmt);
extern void check_create_role(CreateRoleStmt *stmt);
extern void check_alter_role(AlterRoleStmt *stmt);

/* server_access_guard.c */
extern void guard_server_access(Node *node);

#endif							/* PGPANEL_GUARD_ROLE_GUARD_H */
