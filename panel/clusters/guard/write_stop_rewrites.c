/*
 * write_stop_rewrites.c: rewrites that would grow what is stopped. VACUUM
 * FULL, REINDEX (and CLUSTER, which write_stop_statements.c refuses) pack a
 * relation to its fillfactor. They stay allowed, to give space back after
 * DELETE, unless a fillfactor below the default (set before the stop) would
 * make the rewrite larger.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/reloptions.h"
#include "access/table.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "commands/defrem.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "write_stop.h"

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

void
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

void
quota_reindex(ReindexStmt *stmt)
{
	if (stmt->kind == REINDEX_OBJECT_INDEX || stmt->kind == REINDEX_OBJECT_TABLE)
		check_rewrite_of(named_relation(stmt->relation), true);
	else
		check_rewrite_of_all(true);
}
