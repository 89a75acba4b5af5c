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
 *
 * Here: the two settings, who and what they stop, and the one refusal. The
 * checks that call them (writes through the executor, utility statements,
 * rewrites, functions that write) are in the files write_stop.h names.
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/syscache.h"

#include "name_list.h"
#include "pgpanel_guard.h"
#include "write_stop.h"

static char *readonly_databases = NULL;
static char *readonly_owners = NULL;
static NameList *readonly_database_list = NULL;
static NameList *readonly_owner_list = NULL;

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

/* The quotas follow names: whether a database's, or a role's, is on its list. */
bool
database_listed(const char *name)
{
	return name_listed(readonly_database_list, name);
}

bool
owner_listed(const char *name)
{
	return name_listed(readonly_owner_list, name);
}

/* Whether any role is listed: spares looking up the owners of what is written when none is. */
bool
any_owner_stopped(void)
{
	return readonly_owner_list != NULL;
}

const char *
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

bool
database_is_readonly(void)
{
	return readonly_database_list != NULL &&
		name_listed(readonly_database_list, current_database_name());
}

/* The role's name when it is in readonly_owners, else NULL. */
const char *
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
void
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

void
refuse_database_write(void)
{
	refuse_over_quota(true, current_database_name(), DATABASE_STOPPED_DETAIL);
}

void
refuse_owner_write(const char *role)
{
	refuse_over_quota(false, role, ROLE_STOPPED_DETAIL);
}

RelationFacts
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
const char *
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

/* The relation a utility statement names, looked up without a lock (PostgreSQL locks it next). */
Oid
named_relation(RangeVar *relation)
{
	return relation != NULL ? RangeVarGetRelid(relation, NoLock, true) : InvalidOid;
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
