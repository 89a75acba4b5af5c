/*
 * pgpanel_guard.h: what the module's entry point (pgpanel_guard.c) calls in
 * its concerns, and the two questions one concern asks another. Calls go one
 * way: pgpanel_guard.c -> the concerns -> name_list.c.
 *
 *  - the role guard: the reserved roles, the attributes and the statements
 *    that reach the operating system (pgpanel_guard.reserved_roles);
 *    role_guard.c, with reserved_roles.c, role_membership.c and
 *    server_access_guard.c (role_guard.h);
 *  - measure_guard.c: what would only blind the panel's measurement;
 *  - the storage quotas' write stop (pgpanel_guard.readonly_databases,
 *    pgpanel_guard.readonly_owners): write_stop.c, with
 *    write_stop_executor.c, write_stop_statements.c, write_stop_rewrites.c
 *    and write_stop_functions.c (write_stop.h);
 *  - replication_guard.c: the tenants' replication roles, logical only
 *    (pgpanel_guard.logical_replication_roles);
 *  - subscription_guard.c: subscriptions only the superuser's, publications
 *    never the panel's other roles'.
 */
#ifndef PGPANEL_GUARD_H
#define PGPANEL_GUARD_H

#include "postgres.h"

#include "nodes/nodes.h"

/* role_guard.c */
extern bool is_guarded(Node *node);
extern void guard_statement(Node *node);

/* reserved_roles.c (subscription_guard.c asks role_is_reserved too) */
extern void reserved_roles_define_settings(void);
extern bool role_is_reserved(const char *role);

/* measure_guard.c */
extern bool is_measure_guarded(Node *node);
extern void guard_measurement(Node *node);

/* write_stop.c */
extern void write_stop_define_settings(void);
extern bool quota_active(void);

/* write_stop_executor.c, write_stop_functions.c */
extern void write_stop_install_executor_hook(void);
extern void write_stop_install_function_hook(void);

/* write_stop_statements.c */
extern bool is_quota_statement(Node *node);
extern void quota_statement(Node *node);

/* subscription_guard.c */
extern bool is_subscription_guarded(Node *node);
extern void guard_subscriptions(Node *node);

/* replication_guard.c (role_guard.c asks refuse_logical_role_rename too) */
extern void replication_guard_define_settings(void);
extern void replication_guard_install_hooks(void);
extern void refuse_logical_role_rename(const char *role);

#endif							/* PGPANEL_GUARD_H */
