/*
 * pgpanel_guard: refuses the statements that would let a tenant's admin role
 * (LOGIN CREATEDB CREATEROLE, not superuser) reach the operating system or the
 * control panel's own roles.
 *
 * On PostgreSQL 15 a CREATEROLE role may grant itself any non-superuser role,
 * pg_execute_server_program and pg_read_server_files included, and ALTER or
 * DROP any non-superuser role. This module, loaded through
 * shared_preload_libraries, looks at every utility statement run by a role
 * that is not superuser and refuses:
 *
 *  - membership changes involving a reserved role on either side (GRANT,
 *    REVOKE, CREATE ROLE ... IN ROLE / ROLE / ADMIN, ALTER GROUP), and granting
 *    a role that is itself a member of a reserved role;
 *  - CREATE/ALTER ROLE with SUPERUSER, REPLICATION or BYPASSRLS;
 *  - CREATE, ALTER, ALTER ... SET, RENAME, DROP, COMMENT ON of a reserved role,
 *    REASSIGN OWNED / DROP OWNED naming one, OWNER TO one, object privileges
 *    granted to or revoked from one;
 *  - ALTER SYSTEM, COPY to or from a program or a server file, LOAD.
 *
 * The reserved roles come from pgpanel_guard.reserved_roles, which only the
 * server's configuration file sets. Superusers (the panel's own) are exempt.
 *
 * It also enforces the storage quotas the panel measures, with two more lists
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
 * And the tenants' replication roles (pg_allow_replication), listed in
 * pgpanel_guard.logical_replication_roles (the configuration file only): such
 * a role may decode logically, never copy the server (BASE_BACKUP streams its
 * files, physical START_REPLICATION its WAL). Replication commands never reach
 * ProcessUtility; the one hook they pass is emit_log_hook, on the "received
 * replication command" line that log_replication_commands makes a LOG: the
 * guard turns that setting on for good.
 * A listed role is not renamed (that would take it off the list).
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_trigger.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "replication/walsender.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/syscache.h"
#include "utils/varlena.h"

#if PG_VERSION_NUM < 140000
#error "pgpanel_guard needs PostgreSQL 14 or later"
#endif
#if PG_VERSION_NUM < 150000
#define MarkGUCPrefixReserved(prefix) EmitWarningsOnPlaceholders(prefix)
#endif

PG_MODULE_MAGIC;

void _PG_init(void);

#define DEFAULT_RESERVED_ROLES \
	"pg_execute_server_program, pg_read_server_files, pg_write_server_files"

#define RESERVED_DETAIL(role) \
	errdetail("Role \"%s\" is reserved by the control panel.", (role))
#define ONLY_SUPERUSER_HINT \
	errhint("Only the control panel's superuser may do this.")

static char *reserved_roles = NULL;
static ProcessUtility_hook_type prev_hook = NULL;

/*
 * The three settings are lists of identifiers, each parsed once, when the
 * configuration is (re)loaded, into a NameList kept as the setting's "extra"
 * (NULL when empty): the hooks compare names and never parse.
 */
typedef struct NameList
{
	int			count;
	NameData	names[FLEXIBLE_ARRAY_MEMBER];
} NameList;

static NameList *reserved_role_list = NULL;
static NameList *logical_role_list = NULL;

static bool
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

static void
assign_reserved_roles(const char *newval, void *extra)
{
	reserved_role_list = (NameList *) extra;
}

static bool
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

static bool
is_reserved(const char *role)
{
	return name_listed(reserved_role_list, role);
}

/* The name a RoleSpec stands for; NULL for PUBLIC (which is no role). */
static const char *
rolespec_name(const RoleSpec *spec)
{
	if (spec == NULL || spec->roletype == ROLESPEC_PUBLIC)
		return NULL;
	if (spec->roletype == ROLESPEC_CSTRING)
		return spec->rolename;
	return get_rolespec_name(spec);
}

/* ALTER, DROP, RENAME...: the role itself must not be reserved. */
static void
refuse_reserved_target(const char *role, const char *action)
{
	if (is_reserved(role))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to %s role \"%s\"", action, role),
				 RESERVED_DETAIL(role),
				 ONLY_SUPERUSER_HINT));
}

/* A role whose membership is given or taken away. */
static void
check_granted_role(const char *role, bool is_grant)
{
	int			i;
	Oid			roleid;

	if (role == NULL)
		return;
	if (is_reserved(role))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to %s role \"%s\"",
						is_grant ? "grant" : "revoke", role),
				 RESERVED_DETAIL(role),
				 ONLY_SUPERUSER_HINT));
	if (!is_grant)
		return;
	/* A role that holds a reserved one would hand it on. */
	roleid = get_role_oid(role, true);
	if (!OidIsValid(roleid))
		return;
	for (i = 0; reserved_role_list != NULL && i < reserved_role_list->count; i++)
	{
		const char *reserved = NameStr(reserved_role_list->names[i]);
		Oid			reservedid = get_role_oid(reserved, true);

		if (OidIsValid(reservedid) && is_member_of_role_nosuper(roleid, reservedid))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied to grant role \"%s\"", role),
					 errdetail("Role \"%s\" is a member of \"%s\", which is reserved by the control panel.",
							   role, reserved),
					 ONLY_SUPERUSER_HINT));
	}
}

/* A role that gains or loses a membership. */
static void
check_member_role(const char *role)
{
	if (is_reserved(role))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to change the memberships of role \"%s\"", role),
				 RESERVED_DETAIL(role),
				 ONLY_SUPERUSER_HINT));
}

static void
check_member_list(List *roles)
{
	ListCell   *cell;

	foreach(cell, roles)
		check_member_role(rolespec_name(lfirst_node(RoleSpec, cell)));
}

static void
check_owner(const RoleSpec *spec)
{
	const char *role = rolespec_name(spec);

	if (is_reserved(role))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to give ownership to role \"%s\"", role),
				 RESERVED_DETAIL(role),
				 ONLY_SUPERUSER_HINT));
}

static void
check_privilege_grantees(List *grantees, bool is_grant)
{
	ListCell   *cell;

	foreach(cell, grantees)
	{
		const char *role = rolespec_name(lfirst_node(RoleSpec, cell));

		if (is_reserved(role))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg(is_grant ? "permission denied to grant privileges to role \"%s\""
							: "permission denied to revoke privileges from role \"%s\"",
							role),
					 RESERVED_DETAIL(role),
					 ONLY_SUPERUSER_HINT));
	}
}

/* SUPERUSER, REPLICATION and BYPASSRLS stay the panel's. */
static void
check_role_attributes(List *options, bool creating)
{
	ListCell   *cell;

	foreach(cell, options)
	{
		DefElem    *opt = lfirst_node(DefElem, cell);
		const char *attribute = NULL;

		if (strcmp(opt->defname, "superuser") == 0)
			attribute = "SUPERUSER";
		else if (strcmp(opt->defname, "isreplication") == 0)
			attribute = "REPLICATION";
		else if (strcmp(opt->defname, "bypassrls") == 0)
			attribute = "BYPASSRLS";
		else
			continue;
		/* "CREATE ROLE x NOSUPERUSER" only states the default. */
		if (creating && !defGetBoolean(opt))
			continue;
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 creating ? errmsg("permission denied to create a role with the %s attribute", attribute)
				 : errmsg("permission denied to change the %s attribute of a role", attribute),
				 errdetail("The SUPERUSER, REPLICATION and BYPASSRLS attributes are reserved by the control panel."),
				 ONLY_SUPERUSER_HINT));
	}
}

static void
check_grant_role(GrantRoleStmt *stmt)
{
	ListCell   *cell;

	foreach(cell, stmt->granted_roles)
	{
		AccessPriv *priv = lfirst_node(AccessPriv, cell);

		check_granted_role(priv->priv_name, stmt->is_grant);
	}
	check_member_list(stmt->grantee_roles);
	if (stmt->grantor != NULL && is_reserved(rolespec_name(stmt->grantor)))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to name role \"%s\" as grantor",
						rolespec_name(stmt->grantor)),
				 RESERVED_DETAIL(rolespec_name(stmt->grantor)),
				 ONLY_SUPERUSER_HINT));
}

static void
check_create_role(CreateRoleStmt *stmt)
{
	ListCell   *cell;

	refuse_reserved_target(stmt->role, "create");
	check_role_attributes(stmt->options, true);
	foreach(cell, stmt->options)
	{
		DefElem    *opt = lfirst_node(DefElem, cell);

		if (strcmp(opt->defname, "addroleto") == 0)
		{
			/* CREATE ROLE x IN ROLE r: x becomes a member of r. */
			ListCell   *r;

			foreach(r, (List *) opt->arg)
				check_granted_role(rolespec_name(lfirst_node(RoleSpec, r)), true);
		}
		else if (strcmp(opt->defname, "rolemembers") == 0 ||
				 strcmp(opt->defname, "adminmembers") == 0)
			check_member_list((List *) opt->arg);
	}
}

static void
check_alter_role(AlterRoleStmt *stmt)
{
	const char *role = rolespec_name(stmt->role);
	ListCell   *cell;

	foreach(cell, stmt->options)
	{
		DefElem    *opt = lfirst_node(DefElem, cell);

		/* ALTER GROUP role ADD|DROP USER members */
		if (strcmp(opt->defname, "rolemembers") == 0)
		{
			check_granted_role(role, stmt->action > 0);
			check_member_list((List *) opt->arg);
		}
	}
	refuse_reserved_target(role, "alter");
	check_role_attributes(stmt->options, false);
}

static void
check_alter_default_privileges(AlterDefaultPrivilegesStmt *stmt)
{
	ListCell   *cell;

	foreach(cell, stmt->options)
	{
		DefElem    *opt = lfirst_node(DefElem, cell);

		if (strcmp(opt->defname, "roles") == 0)
		{
			ListCell   *r;

			foreach(r, (List *) opt->arg)
				refuse_reserved_target(rolespec_name(lfirst_node(RoleSpec, r)),
									   "alter default privileges of");
		}
	}
	if (stmt->action != NULL)
		check_privilege_grantees(stmt->action->grantees, stmt->action->is_grant);
}

static void
check_alter_table(AlterTableStmt *stmt)
{
	ListCell   *cell;

	foreach(cell, stmt->cmds)
	{
		AlterTableCmd *cmd = lfirst_node(AlterTableCmd, cell);

		if (cmd->subtype == AT_ChangeOwner)
			check_owner(cmd->newowner);
	}
}

static void
check_createdb(CreatedbStmt *stmt)
{
	ListCell   *cell;

	foreach(cell, stmt->options)
	{
		DefElem    *opt = lfirst_node(DefElem, cell);

		if (strcmp(opt->defname, "owner") == 0 && opt->arg != NULL)
		{
			const char *owner = defGetString(opt);

			if (is_reserved(owner))
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
						 errmsg("permission denied to give ownership to role \"%s\"", owner),
						 RESERVED_DETAIL(owner),
						 ONLY_SUPERUSER_HINT));
		}
	}
}

static void
check_copy(CopyStmt *stmt)
{
	if (stmt->is_program)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to COPY to or from an external program"),
				 errdetail("Running programs on the database server is reserved by the control panel."),
				 errhint("Use COPY ... FROM STDIN or COPY ... TO STDOUT (psql's \\copy) instead.")));
	if (stmt->filename != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to COPY to or from a file on the server"),
				 errdetail("Reading and writing server files is reserved by the control panel."),
				 errhint("Use COPY ... FROM STDIN or COPY ... TO STDOUT (psql's \\copy) instead.")));
}

static void
guard_statement(Node *node)
{
	switch (nodeTag(node))
	{
		case T_GrantRoleStmt:
			check_grant_role((GrantRoleStmt *) node);
			break;
		case T_CreateRoleStmt:
			check_create_role((CreateRoleStmt *) node);
			break;
		case T_AlterRoleStmt:
			check_alter_role((AlterRoleStmt *) node);
			break;
		case T_AlterRoleSetStmt:
			refuse_reserved_target(rolespec_name(((AlterRoleSetStmt *) node)->role), "alter");
			break;
		case T_DropRoleStmt:
			{
				ListCell   *cell;

				foreach(cell, ((DropRoleStmt *) node)->roles)
					refuse_reserved_target(rolespec_name(lfirst_node(RoleSpec, cell)), "drop");
				break;
			}
		case T_RenameStmt:
			{
				RenameStmt *stmt = (RenameStmt *) node;

				if (stmt->renameType == OBJECT_ROLE)
				{
					refuse_reserved_target(stmt->subname, "rename");
					if (name_listed(logical_role_list, stmt->subname))
						ereport(ERROR,
								(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
								 errmsg("permission denied to rename role \"%s\"", stmt->subname),
								 errdetail("A replication role keeps its name: the control panel restricts it by name."),
								 ONLY_SUPERUSER_HINT));
					if (is_reserved(stmt->newname))
						ereport(ERROR,
								(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
								 errmsg("permission denied to rename a role to \"%s\"", stmt->newname),
								 RESERVED_DETAIL(stmt->newname),
								 ONLY_SUPERUSER_HINT));
				}
				break;
			}
		case T_CommentStmt:
			{
				CommentStmt *stmt = (CommentStmt *) node;

				if (stmt->objtype == OBJECT_ROLE)
					refuse_reserved_target(strVal(stmt->object), "comment on");
				break;
			}
		case T_ReassignOwnedStmt:
			{
				ReassignOwnedStmt *stmt = (ReassignOwnedStmt *) node;
				ListCell   *cell;

				foreach(cell, stmt->roles)
					refuse_reserved_target(rolespec_name(lfirst_node(RoleSpec, cell)),
										   "reassign objects owned by");
				refuse_reserved_target(rolespec_name(stmt->newrole), "reassign objects to");
				break;
			}
		case T_DropOwnedStmt:
			{
				ListCell   *cell;

				foreach(cell, ((DropOwnedStmt *) node)->roles)
					refuse_reserved_target(rolespec_name(lfirst_node(RoleSpec, cell)),
										   "drop objects owned by");
				break;
			}
		case T_AlterOwnerStmt:
			check_owner(((AlterOwnerStmt *) node)->newowner);
			break;
		case T_AlterTableStmt:
			check_alter_table((AlterTableStmt *) node);
			break;
		case T_CreateSchemaStmt:
			check_owner(((CreateSchemaStmt *) node)->authrole);
			break;
		case T_CreatedbStmt:
			check_createdb((CreatedbStmt *) node);
			break;
		case T_GrantStmt:
			{
				GrantStmt  *stmt = (GrantStmt *) node;

				check_privilege_grantees(stmt->grantees, stmt->is_grant);
				break;
			}
		case T_AlterDefaultPrivilegesStmt:
			check_alter_default_privileges((AlterDefaultPrivilegesStmt *) node);
			break;
		case T_AlterSystemStmt:
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied to run ALTER SYSTEM"),
					 errdetail("The server's configuration is managed by the control panel."),
					 ONLY_SUPERUSER_HINT));
			break;
		case T_CopyStmt:
			check_copy((CopyStmt *) node);
			break;
		case T_LoadStmt:
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied to load library \"%s\"",
							((LoadStmt *) node)->filename),
					 errdetail("Loading libraries into the server is reserved by the control panel."),
					 errhint("Use CREATE EXTENSION with a trusted extension instead.")));
			break;
		default:
			break;
	}
}

static bool
is_guarded(Node *node)
{
	switch (nodeTag(node))
	{
		case T_GrantRoleStmt:
		case T_CreateRoleStmt:
		case T_AlterRoleStmt:
		case T_AlterRoleSetStmt:
		case T_DropRoleStmt:
		case T_RenameStmt:
		case T_CommentStmt:
		case T_ReassignOwnedStmt:
		case T_DropOwnedStmt:
		case T_AlterOwnerStmt:
		case T_AlterTableStmt:
		case T_CreateSchemaStmt:
		case T_CreatedbStmt:
		case T_GrantStmt:
		case T_AlterDefaultPrivilegesStmt:
		case T_AlterSystemStmt:
		case T_CopyStmt:
		case T_LoadStmt:
			return true;
		default:
			return false;
	}
}

/* ------------------------------------------------------------------------
 * Storage quotas: pgpanel_guard.readonly_databases and readonly_owners.
 *
 * The panel measures sizes; here only the enforcement. With both lists empty
 * (NULL) the hooks return at once.
 * ------------------------------------------------------------------------
 */

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

static inline bool
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

static bool
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
			return true;
		default:
			return false;
	}
}

/* Utility statements that make new data; COPY FROM goes through the executor's check. */
static void
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
		default:
			break;
	}
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
		bool		quota = quota_active() && is_quota_statement(node);

		if ((guarded || quota) && !superuser())
		{
			if (guarded)
				guard_statement(node);
			if (quota)
				quota_statement(node);
		}
	}

	if (prev_hook)
		prev_hook(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params, queryEnv, dest, qc);
}

/* ------------------------------------------------------------------------
 * Logical replication only: pgpanel_guard.logical_replication_roles.
 * ------------------------------------------------------------------------
 */

static char *logical_replication_roles = NULL;
static emit_log_hook_type prev_emit_log_hook = NULL;

#define REPLICATION_COMMAND_PREFIX "received replication command: "
#define LOGICAL_ONLY_DETAIL(role) \
	errdetail("Role \"%s\" may use logical replication only.", (role))

static void
assign_logical_replication_roles(const char *newval, void *extra)
{
	logical_role_list = (NameList *) extra;
}

/*
 * The login role of this replication connection if it is listed, else NULL.
 * session_authorization is the login role's name (set at login; only a
 * superuser may change it), read without the catalogs.
 */
static const char *
logical_only_session(void)
{
	const char *role;

	if (!am_walsender || logical_role_list == NULL)
		return NULL;
	role = GetConfigOption("session_authorization", true, false);
	return name_listed(logical_role_list, role) ? role : NULL;
}

/*
 * The next token of a replication command into buf: an unquoted word upper-cased,
 * a quoted identifier as '"' (never a keyword), any other character by itself.
 */
static const char *
next_token(const char *p, char *buf, size_t size)
{
	size_t		n = 0;

	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\f' || *p == '\v')
		p++;
	if (*p == '"')
	{
		for (p++; *p; p++)
		{
			if (*p == '"' && p[1] == '"')
				p++;
			else if (*p == '"')
			{
				p++;
				break;
			}
		}
		buf[n++] = '"';
	}
	else if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || *p == '_')
	{
		for (; (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
			 (*p >= '0' && *p <= '9') || *p == '_'; p++)
		{
			if (n + 1 < size)
				buf[n++] = (*p >= 'a' && *p <= 'z') ? *p - 'a' + 'A' : *p;
		}
	}
	else if (*p)
		buf[n++] = *p++;
	buf[n] = '\0';
	return p;
}

/* Whether a listed role may run this replication command; anything not named here is refused. */
static bool
logical_command(const char *command)
{
	char		word[NAMEDATALEN + 2];
	const char *p = next_token(command, word, sizeof(word));

	if (strcmp(word, "IDENTIFY_SYSTEM") == 0 || strcmp(word, "SHOW") == 0 ||
		strcmp(word, "DROP_REPLICATION_SLOT") == 0 || strcmp(word, "READ_REPLICATION_SLOT") == 0)
		return true;
	if (strcmp(word, "CREATE_REPLICATION_SLOT") == 0)
	{
		p = next_token(p, word, sizeof(word));	/* the slot's name */
		p = next_token(p, word, sizeof(word));
		if (strcmp(word, "TEMPORARY") == 0)
			p = next_token(p, word, sizeof(word));
		return strcmp(word, "LOGICAL") == 0;
	}
	if (strcmp(word, "START_REPLICATION") == 0)
	{
		p = next_token(p, word, sizeof(word));
		if (strcmp(word, "SLOT") != 0)
			return false;
		p = next_token(p, word, sizeof(word));	/* the slot's name */
		p = next_token(p, word, sizeof(word));
		return strcmp(word, "LOGICAL") == 0;
	}
	return false;
}

static void
pgpanel_guard_emit_log(ErrorData *edata)
{
	char		command[64];
	char		role[NAMEDATALEN];
	const char *listed;

	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
	if (edata->elevel != LOG || edata->message == NULL ||
		strncmp(edata->message, REPLICATION_COMMAND_PREFIX, strlen(REPLICATION_COMMAND_PREFIX)) != 0)
		return;
	listed = logical_only_session();
	if (listed == NULL || logical_command(edata->message + strlen(REPLICATION_COMMAND_PREFIX)))
		return;
	/* Both live in memory the FATAL below resets or frees: keep copies. */
	strlcpy(command, edata->message + strlen(REPLICATION_COMMAND_PREFIX), sizeof(command));
	strlcpy(role, listed, sizeof(role));
	ereport(FATAL,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied to run replication command \"%s\"", command),
			 LOGICAL_ONLY_DETAIL(role),
			 ONLY_SUPERUSER_HINT));
}

void
_PG_init(void)
{
	DefineCustomStringVariable("pgpanel_guard.reserved_roles",
							   "Roles that only a superuser may grant, revoke, alter or drop.",
							   "A comma-separated list of role names, written by the control panel.",
							   &reserved_roles,
							   DEFAULT_RESERVED_ROLES,
							   PGC_SIGHUP,
							   GUC_LIST_INPUT,
							   check_name_list,
							   assign_reserved_roles,
							   NULL);
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
	DefineCustomStringVariable("pgpanel_guard.logical_replication_roles",
							   "Replication roles of tenants: logical replication only.",
							   "A comma-separated list of role names, written by the control panel.",
							   &logical_replication_roles,
							   "",
							   PGC_SIGHUP,
							   GUC_LIST_INPUT,
							   check_name_list,
							   assign_logical_replication_roles,
							   NULL);
	MarkGUCPrefixReserved("pgpanel_guard");

	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = pgpanel_guard_emit_log;
	/*
	 * The command hook sees replication commands through their LOG line only:
	 * on for good (above the configuration file, which a reload re-reads).
	 */
	SetConfigOption("log_replication_commands", "on", PGC_POSTMASTER, PGC_S_OVERRIDE);

	prev_check_perms_hook = ExecutorCheckPerms_hook;
	ExecutorCheckPerms_hook = pgpanel_guard_ExecutorCheckPerms;

	prev_hook = ProcessUtility_hook;
	ProcessUtility_hook = pgpanel_guard_ProcessUtility;
}
