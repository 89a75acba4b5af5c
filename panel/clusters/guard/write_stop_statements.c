/*
 * write_stop_statements.c: the utility statements the write stop refuses in a
 * listed database, or for a listed role: those that make new relations or
 * rewrite one (CREATE TABLE, CREATE TABLE AS / SELECT INTO, CREATE
 * MATERIALIZED VIEW, REFRESH, CREATE INDEX, CREATE SEQUENCE, CLUSTER, ALTER
 * TABLE that rewrites or adds an index, CREATE DATABASE from one, EXPLAIN
 * ANALYZE CREATE TABLE AS), those that give a listed role a relation or take
 * one away (ALTER ... OWNER TO, REASSIGN OWNED), and renaming a listed
 * database or role, or copying a listed database. VACUUM FULL and REINDEX go
 * on to write_stop_rewrites.c. COPY FROM goes through the executor's check.
 */
#include "postgres.h"

#include "commands/defrem.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "utils/acl.h"

#include "pgpanel_guard.h"
#include "write_stop.h"

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
			database_listed(defGetString(opt)))
			refuse_over_quota(true, defGetString(opt), "A database over its quota cannot be copied.");
	}
}

static void
quota_rename(RenameStmt *stmt)
{
	/* The quotas follow names: renaming would shed one. */
	if (stmt->renameType == OBJECT_DATABASE && database_listed(stmt->subname))
		refuse_over_quota(true, stmt->subname, "A database over its quota cannot be renamed.");
	if (stmt->renameType == OBJECT_ROLE && owner_listed(stmt->subname))
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
