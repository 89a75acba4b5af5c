/*
 * pgpanel_guard: the control panel's guard inside every cluster it runs,
 * loaded through shared_preload_libraries. Two concerns, one file each:
 *
 *  - role_guard.c refuses what would let a tenant's admin role (LOGIN
 *    CREATEDB CREATEROLE, not superuser) reach the operating system or the
 *    panel's own roles;
 *  - measure_guard.c refuses what would only blind the panel's measurement
 *    of a tenant's storage;
 *  - write_stop.c stops writes in the databases and on the roles' relations
 *    the panel lists as over their storage quota;
 *  - replication_guard.c keeps the tenants' replication roles to logical
 *    replication.
 *
 * Here: the module's entry point, the one utility hook both use, and the
 * parsing of the lists their settings hold. Superusers (the panel's own) are
 * exempt from both.
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/varlena.h"

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

bool
check_name_list(char **newval, void **extra, GucSource source)
{
	char	   *copy = pstrdup(*newval ? *newval : "");
	List	   *names = NIL;
	NameList   *list = NULL;
	ListCell   *cell;
	Size		size;
	int			i = 0;
	bool		ok = SplitIdentifierString(copy, ',', &names);

	if (!ok)
		GUC_check_errdetail("List syntax is invalid: a comma-separated list of names is expected.");
	else if (names != NIL)
	{
		size = offsetof(NameList, names) + list_length(names) * sizeof(NameData);
#if PG_VERSION_NUM >= 160000
		list = (NameList *) guc_malloc(LOG, size);
#else
		list = (NameList *) malloc(size);
#endif
		if (list == NULL)
			ok = false;
		else
		{
			foreach(cell, names)
				namestrcpy(&list->names[i++], (const char *) lfirst(cell));
			list->count = i;
		}
	}
	list_free(names);
	pfree(copy);
	if (ok)
		*extra = list;
	return ok;
}

bool
name_listed(const NameList *list, const char *name)
{
	int			i;

	if (list == NULL || name == NULL)
		return false;
	for (i = 0; i < list->count; i++)
	{
		if (strcmp(NameStr(list->names[i]), name) == 0)
			return true;
	}
	return false;
}

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

		if ((guarded || measured || quota) && !superuser())
		{
			if (guarded)
				guard_statement(node);
			if (measured)
				guard_measurement(node);
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
	role_guard_define_settings();
	write_stop_define_settings();
	replication_guard_define_settings();
	MarkGUCPrefixReserved("pgpanel_guard");

	write_stop_install_hooks();
	replication_guard_install_hooks();

	prev_hook = ProcessUtility_hook;
	ProcessUtility_hook = pgpanel_guard_ProcessUtility;
}
