/*
 * replication_guard.c: the tenants' replication roles (pg_allow_replication),
 * listed in pgpanel_guard.logical_replication_roles (the configuration file
 * only), may decode logically and never copy the server: BASE_BACKUP streams
 * its files, physical START_REPLICATION its WAL. Replication commands never
 * reach ProcessUtility; the one hook they pass is emit_log_hook, on the
 * "received replication command" line that log_replication_commands makes a
 * LOG: the guard turns that setting on for good. A listed role is not renamed
 * (that would take it off the list): role_guard.c asks here.
 *
 * The same role's REPLICATION attribute also lets it call the SQL functions
 * that make a physical slot (pg_create_physical_replication_slot, and
 * pg_copy_physical_replication_slot, which copies one) over an ordinary
 * connection, where no replication command is logged: an object access hook
 * refuses those when an expression calling one is set up (every call goes
 * through it). So it does pg_drop_replication_slot and
 * pg_replication_slot_advance, which would drop or move the panel's physical
 * slots (its replicas' WAL): the hook does not see which slot is named, so a
 * listed role drops its slots with DROP_REPLICATION_SLOT, which names the slot
 * in its log line and is refused for a physical one. The logical slot
 * functions (create, peek, get changes) stay its own.
 */
#include "postgres.h"

#include "catalog/objectaccess.h"
#include "miscadmin.h"
#include "replication/slot.h"
#include "replication/walsender.h"
#include "utils/elog.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"

#include "name_list.h"
#include "pgpanel_guard.h"

/* ------------------------------------------------------------------------
 * Logical replication only: pgpanel_guard.logical_replication_roles.
 * ------------------------------------------------------------------------
 */

static char *logical_replication_roles = NULL;
static NameList *logical_role_list = NULL;
static emit_log_hook_type prev_emit_log_hook = NULL;
static object_access_hook_type prev_object_access_hook = NULL;

#define ONLY_SUPERUSER_HINT \
	errhint("Only the control panel's superuser may do this.")
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

/*
 * The slot name at p into buf as the replication grammar reads it: a quoted
 * identifier as written, an unquoted one lower-cased.
 */
static void
slot_name_at(const char *p, char *buf, size_t size)
{
	size_t		n = 0;

	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\f' || *p == '\v')
		p++;
	if (*p == '"')
	{
		for (p++; *p; p++)
		{
			if (*p == '"' && p[1] != '"')
				break;
			if (*p == '"')
				p++;
			if (n + 1 < size)
				buf[n++] = *p;
		}
	}
	else
	{
		for (; (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
			 (*p >= '0' && *p <= '9') || *p == '_'; p++)
			if (n + 1 < size)
				buf[n++] = (*p >= 'A' && *p <= 'Z') ? *p - 'A' + 'a' : *p;
	}
	buf[n] = '\0';
}

/* Whether a physical slot of that name exists (the panel's: its replicas', its standbys'). */
static bool
physical_slot_named(const char *name)
{
	ReplicationSlot *slot = SearchNamedReplicationSlot(name, true);

	return slot != NULL && SlotIsPhysical(slot);
}

/* Whether a listed role may run this replication command; anything not named here is refused. */
static bool
logical_command(const char *command)
{
	char		word[NAMEDATALEN + 2];
	const char *p = next_token(command, word, sizeof(word));

	if (strcmp(word, "IDENTIFY_SYSTEM") == 0 || strcmp(word, "SHOW") == 0 ||
		strcmp(word, "READ_REPLICATION_SLOT") == 0)
		return true;
	if (strcmp(word, "DROP_REPLICATION_SLOT") == 0)
	{
		char		name[NAMEDATALEN];

		slot_name_at(p, name, sizeof(name));
		return !physical_slot_named(name);
	}
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

/* The SQL functions that make a physical slot, which holds the server's WAL for a copy of it. */
static bool
makes_physical_slot(Oid funcid)
{
	switch (funcid)
	{
		case F_PG_CREATE_PHYSICAL_REPLICATION_SLOT:
		case F_PG_COPY_PHYSICAL_REPLICATION_SLOT_NAME_NAME_BOOL:
		case F_PG_COPY_PHYSICAL_REPLICATION_SLOT_NAME_NAME:
			return true;
		default:
			return false;
	}
}

/* The SQL functions that drop or move any slot, whose name the hook below does not see. */
static bool
changes_any_slot(Oid funcid)
{
	return funcid == F_PG_DROP_REPLICATION_SLOT || funcid == F_PG_REPLICATION_SLOT_ADVANCE;
}

/*
 * A listed role calling one of them over SQL: the current user (after SET ROLE
 * or inside a SECURITY DEFINER function) is whose REPLICATION attribute the
 * function checks, so that is the role looked up.
 */
static void
pgpanel_guard_replication_object_access(ObjectAccessType access, Oid classId, Oid objectId,
										int subId, void *arg)
{
	const char *role;

	if (prev_object_access_hook)
		prev_object_access_hook(access, classId, objectId, subId, arg);
	if (access != OAT_FUNCTION_EXECUTE || logical_role_list == NULL ||
		!(makes_physical_slot(objectId) || changes_any_slot(objectId)))
		return;
	role = GetUserNameFromId(GetUserId(), true);
	if (role == NULL || !name_listed(logical_role_list, role))
		return;
	if (makes_physical_slot(objectId))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to create a physical replication slot"),
				 LOGICAL_ONLY_DETAIL(role),
				 ONLY_SUPERUSER_HINT));
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("permission denied to drop or advance a replication slot over SQL"),
			 LOGICAL_ONLY_DETAIL(role),
			 errhint("Drop a logical slot with DROP_REPLICATION_SLOT over a replication connection.")));
}

/* role_guard.c, on ALTER ROLE ... RENAME by a role that is not superuser. */
void
refuse_logical_role_rename(const char *role)
{
	if (name_listed(logical_role_list, role))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to rename role \"%s\"", role),
				 errdetail("A replication role keeps its name: the control panel restricts it by name."),
				 ONLY_SUPERUSER_HINT));
}

void
replication_guard_define_settings(void)
{
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
}

void
replication_guard_install_hooks(void)
{
	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = pgpanel_guard_emit_log;
	prev_object_access_hook = object_access_hook;
	object_access_hook = pgpanel_guard_replication_object_access;

	/*
	 * The command hook sees replication commands through their LOG line only:
	 * on for good (above the configuration file, which a reload re-reads).
	 */
	SetConfigOption("log_replication_commands", "on", PGC_POSTMASTER, PGC_S_OVERRIDE);
}
