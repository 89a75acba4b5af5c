/*
 * pgpanel_guard: the control panel's guard inside every cluster it runs,
 * loaded through shared_preload_libraries. Five concerns, a file or a few
 * each (pgpanel_guard.h names them):
 *
 *  - the role guard (role_guard.c) refuses what would let a tenant's admin
 *    role (LOGIN CREATEDB CREATEROLE, not superuser) reach the operating
 *    system or the panel's own roles;
 *  - measure_guard.c refuses what would only blind the panel's measurement
 *    of a tenant's storage;
 *  - the write stop (write_stop.c) stops writes in the databases and on the
 *    roles' relations the panel lists as over their storage quota;
 *  - replication_guard.c keeps the tenants' replication roles to logical
 *    replication;
 *  - subscription_guard.c leaves subscriptions to the superuser alone and
 *    keeps the panel's other roles from publications.
 *
 * Here: the module's entry point, which defines the settings and installs
 * the hooks, and the one utility hook the concerns share. Superusers (the
 * panel's own) are exempt from all of them. The lists the settings hold are
 * parsed in name_list.c, which every concern uses and which calls none.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/guc.h"

#include "pgpanel_guard.h"

#if PG_VERSION_NUM < 140000
#error "pgpanel_guard needs PostgreSQL 14 or later"
#endif
#if PG_VERSION_NUM < 150000
#define MarkGUCPrefixReserved(prefix) EmitWarningsOnPlaceholders(prefix)
#endif

PG_MODULE_MAGIC;

void _PG_init(void);

static ProcessUtility_hook_type prev_hook = NULL;

static void
pgpanel_guard_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
							 bool readOnlyTree, ProcessUtilityContext context,
							 ParamListInfo params, QueryEnvironment *queryEnv,
							 DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *node = pstmt->utilityStmt;

	/*
	 * Only statements that can be refused reach superuser(), which reads the
	 * catalogs: transaction control in an aborted transaction never does.
	 */
	if (node != NULL)
	{
		bool		guarded = is_guarded(node);
		bool		measured = is_measure_guarded(node);
		bool		quota = quota_active() && is_quota_statement(node);
		bool		replicated = is_subscription_guarded(node);

		if ((guarded || measured || quota || replicated) && !superuser())
		{
			if (guarded)
				guard_statement(node);
			if (measured)
				guard_measurement(node);
			if (replicated)
				guard_subscriptions(node);
			if (quota)
				quota_statement(node);
		}
	}

	if (prev_hook)
		prev_hook(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
}


void
_PG_init(void)
{
	reserved_roles_define_settings();
	write_stop_define_settings();
	replication_guard_define_settings();
	MarkGUCPrefixReserved("pgpanel_guard");

	write_stop_install_executor_hook();
	write_stop_install_function_hook();
	replication_guard_install_hooks();

	prev_hook = ProcessUtility_hook;
	ProcessUtility_hook = pgpanel_guard_ProcessUtility;
}
