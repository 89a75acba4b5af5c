/*
 * write_stop.c: enforces the storage quotas the panel measures, with two lists
 * only the configuration file sets (PGC_SIGHUP, empty by default):
 *
 *  - pgpanel_guard.readonly_databases: in these databases no role but a
 *    superuser may write: an ExecutorCheckPerms_hook refuses any relation
 *    asked for INSERT, or for UPDATE of some column (INSERT ... ON CONFLICT,
 *    MERGE inserts and updates, writable CTEs, COPY FROM; SELECT ... FOR
 *    UPDATE asks for no column and stays a read), and the utility hook the
 *    statements that make new relations or rewrite one (CREATE TABLE, CREATE
 *    TABLE AS / SELECT INTO, CREATE MATERIALIZED VIEW, REFRESH, CREATE INDEX,
 *    CREATE SEQUENCE, CLUSTER, ALTER TABLE that rewrites or adds an index,
 *    CREATE DATABASE from one, EXPLAIN ANALYZE CREATE TABLE AS) and renaming
 *    or copying a listed database;
 *  - pgpanel_guard.readonly_owners: the relations these roles own take no
 *    INSERT, UPDATE or COPY FROM (partitions and children included), whoever
 *    writes; the roles create no relation, are given none and give none away
 *    (ALTER ... OWNER TO, REASSIGN OWNED), and are not renamed.
 *
 * Both refuse with SQLSTATE 53100 (disk_full); reads, DELETE, TRUNCATE, DROP,
 * VACUUM (FULL) and ANALYZE stay allowed, to get back under the quota. With
 * both lists empty the hooks return at once.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/reloptions.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_class.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_trigger.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/syscache.h"

#include "pgpanel_guard.h"

static char *readonly_databases = NULL;
static char *readonly_owners = NULL;
static NameList *readonly_database_list = NULL;
static NameList *readonly_owner_list = NULL;
static ExecutorCheckPerms_hook_type prev_check_perms_hook = NULL;

/* The name of the database this backend is connected to (it cannot be renamed meanwhile). */
static NameData my_database_name;

#define QUOTA_HINT \
	errhint("Delete data (DELETE then VACUUM, TRUNCATE or DROP) to get back under the quota, or ask for a larger quota.")

static void
assign_readonly_databases(const char *newval, void *extra)
{
	readonly_database_list = (NameList *) extra;
}

static void
assign_readonly_owners(const char *newval, void *extra)
{
	readonly_owner_list = (NameList *) extra;
}

bool
quota_active(void)
{
	return readonly_database_list != NULL || readonly_owner_list != NULL;
}

static const char *
current_database_name(void)
{
	if (NameStr(my_database_name)[0] == '\0' && OidIsValid(MyDatabaseId))
	{
		char	   *name = get_database_name(MyDatabaseId);

		if (name != NULL)
			namestrcpy(&my_database_name, name);
	}
	return NameStr(my_database_name);
}

static bool
database_is_readonly(void)
{
	return readonly_database_list != NULL &&
		name_listed(readonly_database_list, current_database_name());
}

/* The role's name when it is in readonly_owners, else NULL. */
static const char *
frozen_role(Oid roleid)
{
	char	   *name;

	if (readonly_owner_list == NULL || !OidIsValid(roleid))
		return NULL;
	name = GetUserNameFromId(roleid, true);
	return name_listed(readonly_owner_list, name) ? name : NULL;
}

#define DATABASE_STOPPED_DETAIL \
	"INSERT, UPDATE, COPY FROM and statements that create or rewrite relations are refused; " \
	"reads, DELETE, TRUNCATE, DROP, VACUUM and ANALYZE still work."
#define ROLE_STOPPED_DETAIL \
	"INSERT, UPDATE and COPY FROM into its tables, creating relations as it, and giving " \
	"ownership of a relation to it or away from it are refused; reads, DELETE, TRUNCATE, " \
	"DROP, VACUUM and ANALYZE still work."

/* The one refusal of both lists: a database's or a role's name, and what is refused. */
static void
refuse_over_quota(bool is_database, const char *name, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_DISK_FULL),
			 is_database
			 ? errmsg("database \"%s\" is over its storage quota: writes are stopped", name)
			 : errmsg("role \"%s\" is over its storage quota: writes to its tables are stopped", name),
			 errdetail("%s", detail),
			 QUOTA_HINT));
}

static void
refuse_database_write(void)
{
	refuse_over_quota(true, current_database_name(), DATABASE_STOPPED_DETAIL);
}

static void
refuse_owner_write(const char *role)
{
	refuse_over_quota(false, role, ROLE_STOPPED_DETAIL);
}

/* What the checks need of a relation, in one catalog-cache lookup (owner InvalidOid when it is gone). */
typedef struct RelationFacts
{
	Oid			owner;
	char		relkind;
	bool		has_children;	/* relhassubclass: may be stale true, never stale false */
} RelationFacts;

static RelationFacts
relation_facts(Oid relid)
{
	RelationFacts facts = {InvalidOid, 0, false};
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));

	if (HeapTupleIsValid(tuple))
	{
		Form_pg_class form = (Form_pg_class) GETSTRUCT(tuple);

		facts.owner = form->relowner;
		facts.relkind = form->relkind;
		facts.has_children = form->relhassubclass;
		ReleaseSysCache(tuple);
	}
	return facts;
}

/* The listed owner of one of a relation's partitions or children that keeps data, else NULL. */
static const char *
frozen_inheritor(Oid relid)
{
	ListCell   *cell;

	foreach(cell, find_all_inheritors(relid, NoLock, NULL))
	{
		Oid			child = lfirst_oid(cell);
		RelationFacts facts;
		const char *role;

		if (child == relid)
			continue;
		facts = relation_facts(child);
		if (RELKIND_HAS_STORAGE(facts.relkind) && (role = frozen_role(facts.owner)) != NULL)
			return role;
	}
	return NULL;
}

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
	if (readonly_owner_list != NULL && (role = frozen_write_target(relid, inh)) != NULL)
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

/* The relation a utility statement names, looked up without a lock (PostgreSQL locks it next). */
static Oid
named_relation(RangeVar *relation)
{
	return relation != NULL ? RangeVarGetRelid(relation, NoLock, true) : InvalidOid;
}

static Oid
named_relation_owner(RangeVar *relation)
{
	Oid			relid = named_relation(relation);

	return OidIsValid(relid) ? relation_facts(relid).owner : InvalidOid;
}

/* A relation about to be made: in a frozen database, or owned by a frozen role. */
static void
refuse_new_relation(Oid owner)
{
	const char *role;

	if (database_is_readonly())
		refuse_database_write();
	if ((role = frozen_role(owner)) != NULL)
		refuse_owner_write(role);
}

/*
 * A statement that makes new data in a named relation and, unless ONLY, in
 * its partitions and children too (CREATE INDEX, ALTER TABLE, CLUSTER of a
 * parent go on into them, and what is made there is their owners').
 */
static void
refuse_new_data_in(RangeVar *relation)
{
	Oid			relid = named_relation(relation);
	RelationFacts rel;
	const char *role;

	if (!OidIsValid(relid))
	{
		refuse_new_relation(InvalidOid);
		return;
	}
	rel = relation_facts(relid);
	refuse_new_relation(rel.owner);
	if (relation->inh && rel.has_children && (role = frozen_inheritor(relid)) != NULL)
		refuse_owner_write(role);
}

/* ALTER TABLE subcommands that copy or rewrite the table (or add an index). */
static bool
alter_makes_data(AlterTableCmd *cmd)
{
	switch (cmd->subtype)
	{
		case AT_AlterColumnType:
		case AT_SetTableSpace:
#if PG_VERSION_NUM >= 150000
		case AT_SetAccessMethod:
#endif
		case AT_SetLogged:
		case AT_SetUnLogged:
		case AT_AddIndex:
			return true;
		case AT_SetRelOptions:
		case AT_ReplaceRelOptions:
			/* SET (fillfactor = 10) then VACUUM FULL would make a stopped table ten times as large. */
			return true;
		case AT_AddColumn:
			{
				ColumnDef  *def = castNode(ColumnDef, cmd->def);
				ListCell   *cell;

				/*
				 * A volatile default, an identity or a stored generated column
				 * fills every row; any default is refused, a constant one not
				 * being told apart before parse analysis.
				 */
				if (def->raw_default != NULL || def->identity || def->generated)
					return true;
				foreach(cell, def->constraints)
				{
					ConstrType	type = lfirst_node(Constraint, cell)->contype;

					if (type == CONSTR_DEFAULT || type == CONSTR_IDENTITY ||
						type == CONSTR_GENERATED || type == CONSTR_PRIMARY ||
						type == CONSTR_UNIQUE || type == CONSTR_EXCLUSION)
						return true;
				}
				return false;
			}
		case AT_AddConstraint:
			{
				Constraint *con = castNode(Constraint, cmd->def);

				/* PRIMARY KEY, UNIQUE, EXCLUDE build an index, unless USING INDEX. */
				return (con->contype == CONSTR_PRIMARY || con->contype == CONSTR_UNIQUE ||
						con->contype == CONSTR_EXCLUSION) && con->indexname == NULL;
			}
		default:
			return false;
	}
}

static void
quota_alter_table(AlterTableStmt *stmt)
{
	ListCell   *cell;

	foreach(cell, stmt->cmds)
	{
		AlterTableCmd *cmd = lfirst_node(AlterTableCmd, cell);
		const char *role;

		if (cmd->subtype == AT_ChangeOwner)
		{
			/* Neither given to a frozen role nor taken away from one (a chown past the quota). */
			if ((role = frozen_role(get_rolespec_oid(cmd->newowner, true))) != NULL ||
				(role = frozen_role(named_relation_owner(stmt->relation))) != NULL)
				refuse_owner_write(role);
		}
		else if (alter_makes_data(cmd))
			refuse_new_data_in(stmt->relation);
	}
}

static bool
explain_analyze_creates(ExplainStmt *stmt)
{
	Query	   *query = (Query *) stmt->query;
	ListCell   *cell;

	if (query == NULL || !IsA(query, Query) || query->commandType != CMD_UTILITY ||
		query->utilityStmt == NULL || !IsA(query->utilityStmt, CreateTableAsStmt))
		return false;
	foreach(cell, stmt->options)
	{
		DefElem    *opt = lfirst_node(DefElem, cell);

		if (strcmp(opt->defname, "analyze") == 0 && defGetBoolean(opt))
			return true;
	}
	return false;
}

static void
quota_createdb(CreatedbStmt *stmt)
{
	ListCell   *cell;

	/* A database made from a frozen one would carry its data past the quota. */
	if (database_is_readonly())
		refuse_database_write();
	foreach(cell, stmt->options)
	{
		DefElem    *opt = lfirst_node(DefElem, cell);

		if (strcmp(opt->defname, "template") == 0 && opt->arg != NULL &&
			name_listed(readonly_database_list, defGetString(opt)))
			refuse_over_quota(true, defGetString(opt), "A database over its quota cannot be copied.");
	}
}

static void
quota_rename(RenameStmt *stmt)
{
	/* The quotas follow names: renaming would shed one. */
	if (stmt->renameType == OBJECT_DATABASE && name_listed(readonly_database_list, stmt->subname))
		refuse_over_quota(true, stmt->subname, "A database over its quota cannot be renamed.");
	if (stmt->renameType == OBJECT_ROLE && name_listed(readonly_owner_list, stmt->subname))
		refuse_over_quota(false, stmt->subname, "A role over its quota cannot be renamed.");
}

static void
quota_reassign_owned(ReassignOwnedStmt *stmt)
{
	ListCell   *cell;
	const char *role;

	if ((role = frozen_role(get_rolespec_oid(stmt->newrole, true))) != NULL)
		refuse_owner_write(role);
	foreach(cell, stmt->roles)
	{
		if ((role = frozen_role(get_rolespec_oid(lfirst_node(RoleSpec, cell), true))) != NULL)
			refuse_owner_write(role);
	}
}

/* ------------------------------------------------------------------------
 * Rewrites that would grow what is stopped: VACUUM FULL, REINDEX (and
 * CLUSTER, refused above) pack a relation to its fillfactor. They stay
 * allowed, to give space back after DELETE, unless a fillfactor below the
 * default (set before the stop) would make the rewrite larger.
 * ------------------------------------------------------------------------
 */

#define GROWING_REWRITE_DETAIL \
	"A rewrite (VACUUM FULL, REINDEX, CLUSTER) would pack it to a fillfactor below the default and make it " \
	"larger. RESET (fillfactor) first, or DELETE, TRUNCATE or DROP."

/* Whether a relation's options pack it less densely than PostgreSQL's default would. */
static bool
packs_loosely(char relkind, Datum options, bool isnull)
{
	ListCell   *cell;

	if (isnull)
		return false;
	foreach(cell, untransformRelOptions(options))
	{
		DefElem    *opt = lfirst_node(DefElem, cell);
		int			fillfactor;

		if (strcmp(opt->defname, "fillfactor") != 0)
			continue;
		fillfactor = pg_strtoint32(defGetString(opt));
		/* 100 for tables, 90 for B-tree and GiST indexes (lower ones' own defaults are spared) */
		return relkind == RELKIND_INDEX ? fillfactor < 90 : fillfactor < 100;
	}
	return false;
}

static bool
relation_packs_loosely(Oid relid)
{
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	bool		isnull;
	bool		loose;
	Datum		options;

	if (!HeapTupleIsValid(tuple))
		return false;
	options = SysCacheGetAttr(RELOID, tuple, Anum_pg_class_reloptions, &isnull);
	loose = packs_loosely(((Form_pg_class) GETSTRUCT(tuple))->relkind, options, isnull);
	ReleaseSysCache(tuple);
	return loose;
}

/* Whether one of a table's indexes (rebuilt with it) packs loosely. */
static bool
indexes_pack_loosely(Oid relid)
{
	Relation	indexes = table_open(IndexRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	bool		found = false;

	ScanKeyInit(&key, Anum_pg_index_indrelid, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
	scan = systable_beginscan(indexes, IndexIndrelidIndexId, true, NULL, 1, &key);
	while (!found && HeapTupleIsValid(tuple = systable_getnext(scan)))
		found = relation_packs_loosely(((Form_pg_index) GETSTRUCT(tuple))->indexrelid);
	systable_endscan(scan);
	table_close(indexes, AccessShareLock);
	return found;
}

/* The one refusal of a growing rewrite: the database's name, or the role's. */
static void
refuse_growing_rewrite(Oid owner)
{
	const char *role;

	if (database_is_readonly())
		refuse_over_quota(true, current_database_name(), GROWING_REWRITE_DETAIL);
	if ((role = frozen_role(owner)) != NULL)
		refuse_over_quota(false, role, GROWING_REWRITE_DETAIL);
}

/* A named relation (and, for a parent, its partitions and children) about to be rewritten. */
static void
check_rewrite_of(Oid relid, bool indexes_only)
{
	RelationFacts rel;
	List	   *relids;
	ListCell   *cell;

	if (!OidIsValid(relid))
		return;
	rel = relation_facts(relid);
	relids = rel.has_children ? find_all_inheritors(relid, NoLock, NULL) : list_make1_oid(relid);
	foreach(cell, relids)
	{
		Oid			one = lfirst_oid(cell);
		RelationFacts facts = relation_facts(one);

		if (!database_is_readonly() && frozen_role(facts.owner) == NULL)
			continue;
		if ((facts.relkind == RELKIND_INDEX || !indexes_only) && relation_packs_loosely(one))
			refuse_growing_rewrite(facts.owner);
		if (facts.relkind != RELKIND_INDEX && indexes_pack_loosely(one))
			refuse_growing_rewrite(facts.owner);
	}
}

/* A rewrite of everything in reach (VACUUM FULL, REINDEX SCHEMA / DATABASE without a table). */
static void
check_rewrite_of_all(bool indexes_only)
{
	Relation	classes = table_open(RelationRelationId, AccessShareLock);
	SysScanDesc scan = systable_beginscan(classes, InvalidOid, false, NULL, 0, NULL);
	HeapTuple	tuple;
	Oid			owner = InvalidOid;
	bool		found = false;

	while (!found && HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		Form_pg_class form = (Form_pg_class) GETSTRUCT(tuple);
		bool		isnull;
		Datum		options;

		if (!RELKIND_HAS_STORAGE(form->relkind) || (indexes_only && form->relkind != RELKIND_INDEX))
			continue;
		if (!database_is_readonly() && frozen_role(form->relowner) == NULL)
			continue;
		options = heap_getattr(tuple, Anum_pg_class_reloptions, RelationGetDescr(classes), &isnull);
		if (packs_loosely(form->relkind, options, isnull))
		{
			found = true;
			owner = form->relowner;
		}
	}
	systable_endscan(scan);
	table_close(classes, AccessShareLock);
	if (found)
		refuse_growing_rewrite(owner);
}

static void
quota_vacuum(VacuumStmt *stmt)
{
	ListCell   *cell;
	bool		full = false;

	foreach(cell, stmt->options)
	{
		DefElem    *opt = lfirst_node(DefElem, cell);

		if (strcmp(opt->defname, "full") == 0)
			full = defGetBoolean(opt);
	}
	if (!stmt->is_vacuumcmd || !full)
		return;
	if (stmt->rels == NIL)
		check_rewrite_of_all(false);
	foreach(cell, stmt->rels)
	{
		VacuumRelation *rel = lfirst_node(VacuumRelation, cell);

		if (rel->relation != NULL)
			check_rewrite_of(named_relation(rel->relation), false);
	}
}

static void
quota_reindex(ReindexStmt *stmt)
{
	if (stmt->kind == REINDEX_OBJECT_INDEX || stmt->kind == REINDEX_OBJECT_TABLE)
		check_rewrite_of(named_relation(stmt->relation), true);
	else
		check_rewrite_of_all(true);
}

/* ------------------------------------------------------------------------
 * Functions that write outside any relation the executor checks: large
 * objects (pg_largeobject) and WAL messages. Refused in a stopped database
 * when an expression calling one is set up (every call goes through it).
 * ------------------------------------------------------------------------
 */

static object_access_hook_type prev_object_access_hook = NULL;

static bool
function_grows_database(Oid funcid)
{
	switch (funcid)
	{
		case F_LO_CREAT:
		case F_LO_CREATE:
		case F_LO_FROM_BYTEA:
		case F_LO_IMPORT_TEXT:
		case F_LO_IMPORT_TEXT_OID:
		case F_LOWRITE:
		case F_LO_PUT:
		case F_PG_LOGICAL_EMIT_MESSAGE_BOOL_TEXT_TEXT:
		case F_PG_LOGICAL_EMIT_MESSAGE_BOOL_TEXT_BYTEA:
			return true;
		default:
			return false;
	}
}

static void
pgpanel_guard_object_access(ObjectAccessType access, Oid classId, Oid objectId, int subId, void *arg)
{
	if (prev_object_access_hook)
		prev_object_access_hook(access, classId, objectId, subId, arg);
	if (access == OAT_FUNCTION_EXECUTE && readonly_database_list != NULL &&
		function_grows_database(objectId) && database_is_readonly() && !superuser())
		refuse_over_quota(true, current_database_name(),
						  "Writing large objects (lo_from_bytea, lo_create, lowrite, lo_put) and WAL messages "
						  "is refused; reading large objects and lo_unlink still work.");
}

bool
is_quota_statement(Node *node)
{
	switch (nodeTag(node))
	{
		case T_CreateStmt:
		case T_CreateTableAsStmt:
		case T_CreateSeqStmt:
		case T_IndexStmt:
		case T_RefreshMatViewStmt:
		case T_ClusterStmt:
		case T_CreatedbStmt:
		case T_AlterTableStmt:
		case T_AlterTableMoveAllStmt:
		case T_ExplainStmt:
		case T_RenameStmt:
		case T_ReassignOwnedStmt:
		case T_VacuumStmt:
		case T_ReindexStmt:
			return true;
		default:
			return false;
	}
}

/* Utility statements that make new data; COPY FROM goes through the executor's check. */
void
quota_statement(Node *node)
{
	switch (nodeTag(node))
	{
		case T_CreateStmt:
		case T_CreateSeqStmt:
		case T_CreateTableAsStmt:	/* CREATE TABLE AS, SELECT INTO, CREATE MATERIALIZED VIEW */
		case T_AlterTableMoveAllStmt:	/* moves the current user's relations */
			/* A foreign table (CreateForeignTableStmt has its own tag) keeps no data here. */
			refuse_new_relation(GetUserId());
			break;
		case T_ExplainStmt:
			if (explain_analyze_creates((ExplainStmt *) node))
				refuse_new_relation(GetUserId());
			break;
		case T_IndexStmt:
			refuse_new_data_in(((IndexStmt *) node)->relation);
			break;
		case T_RefreshMatViewStmt:
			refuse_new_data_in(((RefreshMatViewStmt *) node)->relation);
			break;
		case T_ClusterStmt:
			{
				ClusterStmt *stmt = (ClusterStmt *) node;

				/* CLUSTER without a table rewrites those of the current user. */
				if (stmt->relation != NULL)
					refuse_new_data_in(stmt->relation);
				else
					refuse_new_relation(GetUserId());
				break;
			}
		case T_CreatedbStmt:
			quota_createdb((CreatedbStmt *) node);
			break;
		case T_AlterTableStmt:
			quota_alter_table((AlterTableStmt *) node);
			break;
		case T_RenameStmt:
			quota_rename((RenameStmt *) node);
			break;
		case T_ReassignOwnedStmt:
			quota_reassign_owned((ReassignOwnedStmt *) node);
			break;
		case T_VacuumStmt:
			quota_vacuum((VacuumStmt *) node);
			break;
		case T_ReindexStmt:
			quota_reindex((ReindexStmt *) node);
			break;
		default:
			break;
	}
}

void
write_stop_define_settings(void)
{
	DefineCustomStringVariable("pgpanel_guard.readonly_databases",
							   "Databases over their storage quota: no role but a superuser may write in them.",
							   "A comma-separated list of database names, written by the control panel.",
							   &readonly_databases,
							   "",
							   PGC_SIGHUP,
							   GUC_LIST_INPUT,
							   check_name_list,
							   assign_readonly_databases,
							   NULL);
	DefineCustomStringVariable("pgpanel_guard.readonly_owners",
							   "Roles over their storage quota: no role but a superuser may write in their tables.",
							   "A comma-separated list of role names, written by the control panel.",
							   &readonly_owners,
							   "",
							   PGC_SIGHUP,
							   GUC_LIST_INPUT,
							   check_name_list,
							   assign_readonly_owners,
							   NULL);
}

void
write_stop_install_hooks(void)
{
	prev_check_perms_hook = ExecutorCheckPerms_hook;
	ExecutorCheckPerms_hook = pgpanel_guard_ExecutorCheckPerms;
	prev_object_access_hook = object_access_hook;
	object_access_hook = pgpanel_guard_object_access;
}
