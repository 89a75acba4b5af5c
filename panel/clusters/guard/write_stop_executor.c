/*
 * write_stop_executor.c: the write stop's check of the writes the executor
 * asks permission for, through an ExecutorCheckPerms_hook: any relation asked
 * for INSERT, or for UPDATE of some column (INSERT ... ON CONFLICT, MERGE
 * inserts and updates, writable CTEs, COPY FROM; SELECT ... FOR UPDATE asks
 * for no column and stays a read), in a listed database or owned by a listed
 * role (partitions and children included), is refused. A foreign key's
 * action, which follows an allowed DELETE, is let through.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_class.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_trigger.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/syscache.h"

#include "pgpanel_guard.h"
#include "write_stop.h"

static ExecutorCheckPerms_hook_type prev_check_perms_hook = NULL;

/* The listed owner of a relation a write lands in, partitions and children included. */
static const char *
frozen_write_target(Oid relid, bool inh)
{
	RelationFacts rel = relation_facts(relid);
	const char *role;

	if (RELKIND_HAS_STORAGE(rel.relkind) && (role = frozen_role(rel.owner)) != NULL)
		return role;

	/*
	 * Rows routed to a partition, or updated in a child table, are checked by
	 * PostgreSQL on the parent only: the children's owners are looked at here.
	 * relhassubclass spares the scan of pg_inherits for a table without any
	 * (every UPDATE not ONLY asks with inh set).
	 */
	if ((inh || rel.relkind == RELKIND_PARTITIONED_TABLE) && rel.has_children)
		return frozen_inheritor(relid);
	return NULL;
}

/* Whether a BEFORE UPDATE row trigger of the relation (or of a partition) may change the rows written. */
static bool
has_before_update_row_trigger(Oid relid)
{
	Relation	triggers = table_open(TriggerRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	bool		found = false;

	ScanKeyInit(&key, Anum_pg_trigger_tgrelid, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
	scan = systable_beginscan(triggers, TriggerRelidNameIndexId, true, NULL, 1, &key);
	while (!found && HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		Form_pg_trigger trigger = (Form_pg_trigger) GETSTRUCT(tuple);

		found = trigger->tgenabled != TRIGGER_DISABLED && TRIGGER_FOR_ROW(trigger->tgtype) &&
			TRIGGER_FOR_BEFORE(trigger->tgtype) && TRIGGER_FOR_UPDATE(trigger->tgtype);
	}
	systable_endscan(scan);
	table_close(triggers, AccessShareLock);
	return found;
}

/* Whether one of a foreign key's columns has a default, which ON ... SET DEFAULT writes. */
static bool
keys_have_default(Relation rel, const ForeignKeyCacheInfo *fk)
{
	int			i;

	for (i = 0; i < fk->nkeys; i++)
	{
		if (TupleDescAttr(RelationGetDescr(rel), fk->conkey[i] - 1)->atthasdef)
			return true;
	}
	return false;
}

/*
 * Whether the columns updated are all keys of one of the relation's foreign
 * keys that has an action. SET DEFAULT counts only when no key has a default
 * (it then sets NULL): a default may be of any size, a volatile function's
 * result, and a composite key MATCH SIMPLE with a NULL in it needs no parent
 * row to match.
 */
static bool
updates_only_action_keys(Oid relid, const Bitmapset *updatedCols)
{
	Relation	rel = table_open(relid, NoLock);	/* the executor holds its lock */
	ListCell   *cell;
	bool		found = false;

	foreach(cell, RelationGetFKeyList(rel))
	{
		ForeignKeyCacheInfo *fk = lfirst_node(ForeignKeyCacheInfo, cell);
		HeapTuple	tuple = SearchSysCache1(CONSTROID, ObjectIdGetDatum(fk->conoid));
		Form_pg_constraint con;
		Bitmapset  *keys = NULL;
		bool		acts;
		int			i;

		if (!HeapTupleIsValid(tuple))
			continue;
		con = (Form_pg_constraint) GETSTRUCT(tuple);
		acts = con->confdeltype == FKCONSTR_ACTION_SETNULL || con->confupdtype == FKCONSTR_ACTION_CASCADE ||
			con->confupdtype == FKCONSTR_ACTION_SETNULL ||
			((con->confdeltype == FKCONSTR_ACTION_SETDEFAULT ||
			  con->confupdtype == FKCONSTR_ACTION_SETDEFAULT) && !keys_have_default(rel, fk));
		ReleaseSysCache(tuple);
		for (i = 0; acts && i < fk->nkeys; i++)
			keys = bms_add_member(keys, fk->conkey[i] - FirstLowInvalidHeapAttributeNumber);
		found = acts && bms_is_subset(updatedCols, keys);
		bms_free(keys);
		if (found)
			break;
	}
	table_close(rel, NoLock);
	return found;
}

/*
 * A foreign key's action (ON DELETE SET NULL / SET DEFAULT, ON UPDATE
 * CASCADE ...) runs its UPDATE of the referencing rows under
 * SECURITY_NOFORCE_RLS, which only the referential integrity code sets. It
 * follows a DELETE (allowed, and otherwise impossible on such a parent, rows
 * or no rows) or an UPDATE of the parent (checked on its own): let through.
 * But the flag stays set for the user code that UPDATE runs: a trigger's or
 * a CHECK function's own UPDATEs (of other columns, other tables: not keys of
 * an action), and a BEFORE UPDATE row trigger, which could fill the very rows
 * the action writes. Rare: none of this is looked at outside such an action.
 */
static bool
is_foreign_key_action(Oid relid, const Bitmapset *updatedCols)
{
	ListCell   *cell;

	if (!InNoForceRLSOperation() || !updates_only_action_keys(relid, updatedCols))
		return false;
	if (relation_facts(relid).relkind != RELKIND_PARTITIONED_TABLE)
		return !has_before_update_row_trigger(relid);
	foreach(cell, find_all_inheritors(relid, NoLock, NULL))
	{
		if (has_before_update_row_trigger(lfirst_oid(cell)))
			return false;
	}
	return true;
}

/*
 * Whether a relation's required permissions make it a write: INSERT, or
 * UPDATE of some column (SELECT ... FOR UPDATE asks for ACL_UPDATE with no
 * column updated, and stays a read), but a foreign key's action.
 */
static inline bool
is_write(Oid relid, AclMode perms, const Bitmapset *updatedCols)
{
	if ((perms & ACL_INSERT) != 0)
		return true;
	if ((perms & ACL_UPDATE) == 0 || bms_is_empty(updatedCols))
		return false;
	return !is_foreign_key_action(relid, updatedCols);
}

/* A relation the plan writes: false (or an error) when it is frozen. */
static bool
check_write(Oid relid, bool inh, bool ereport_on_violation)
{
	const char *role;

	/* superuser() remembers its last answer: no catalog lookup after the first write. */
	if (superuser())
		return true;
	if (database_is_readonly())
	{
		if (!ereport_on_violation)
			return false;
		refuse_database_write();
	}
	if (any_owner_stopped() && (role = frozen_write_target(relid, inh)) != NULL)
	{
		if (!ereport_on_violation)
			return false;
		refuse_owner_write(role);
	}
	return true;
}

/* The two signatures differ in where a relation's required permissions are kept. */
#if PG_VERSION_NUM >= 160000
static bool
pgpanel_guard_ExecutorCheckPerms(List *rangeTable, List *rtePermInfos, bool ereport_on_violation)
{
	ListCell   *cell;

	if (prev_check_perms_hook &&
		!prev_check_perms_hook(rangeTable, rtePermInfos, ereport_on_violation))
		return false;
	if (!quota_active())
		return true;
	foreach(cell, rtePermInfos)
	{
		RTEPermissionInfo *perm = lfirst_node(RTEPermissionInfo, cell);

		if (is_write(perm->relid, perm->requiredPerms, perm->updatedCols) &&
			!check_write(perm->relid, perm->inh, ereport_on_violation))
			return false;
	}
	return true;
}
#else
static bool
pgpanel_guard_ExecutorCheckPerms(List *rangeTable, bool ereport_on_violation)
{
	ListCell   *cell;

	if (prev_check_perms_hook && !prev_check_perms_hook(rangeTable, ereport_on_violation))
		return false;
	if (!quota_active())
		return true;
	foreach(cell, rangeTable)
	{
		RangeTblEntry *rte = lfirst_node(RangeTblEntry, cell);

		if (rte->rtekind == RTE_RELATION && is_write(rte->relid, rte->requiredPerms, rte->updatedCols) &&
			!check_write(rte->relid, rte->inh, ereport_on_violation))
			return false;
	}
	return true;
}
#endif

void
write_stop_install_executor_hook(void)
{
	prev_check_perms_hook = ExecutorCheckPerms_hook;
	ExecutorCheckPerms_hook = pgpanel_guard_ExecutorCheckPerms;
}
