/*
 * pgpanel_guard.h: what the two halves of the guard share with the module's
 * entry point (pgpanel_guard.c): the lists of names its settings hold, and the
 * checks its utility hook calls.
 *
 *  - role_guard.c: the reserved roles, the attributes and the statements that
 *    reach the operating system (pgpanel_guard.reserved_roles);
 *  - measure_guard.c: what would only blind the panel's measurement;
 *  - write_stop.c: the storage quotas' write stop
 *    (pgpanel_guard.readonly_databases, pgpanel_guard.readonly_owners);
 *  - replication_guard.c: the tenants' replication roles, logical only
 *    (pgpanel_guard.logical_replication_roles).
 */
#ifndef PGPANEL_GUARD_H
#define PGPANEL_GUARD_H

#include "postgres.h"

#include "nodes/nodes.h"
#include "utils/guc.h"

/*
 * The settings are lists of identifiers, each parsed once, when the
 * configuration is (re)loaded, into a NameList kept as the setting's "extra"
 * (NULL when empty): the hooks compare names and never parse.
 */
typedef struct NameList
{
	int			count;
	NameData	names[FLEXIBLE_ARRAY_MEMBER];
} NameList;

extern bool check_name_list(char **newval, void **extra, GucSource source);
extern bool name_listed(const NameList *list, const char *name);

/* role_guard.c */
extern void role_guard_define_settings(void);
extern bool is_guarded(Node *node);
extern void guard_statement(Node *node);

/* measure_guard.c */
extern bool is_measure_guarded(Node *node);
extern void guard_measurement(Node *node);

/* write_stop.c */
extern void write_stop_define_settings(void);
extern void write_stop_install_hooks(void);
extern bool quota_active(void);
extern bool is_quota_statement(Node *node);
extern void quota_statement(Node *node);

/* replication_guard.c */
extern void replication_guard_define_settings(void);
extern void replication_guard_install_hooks(void);
extern void refuse_logical_role_rename(const char *role);

#endif							/* PGPANEL_GUARD_H */
