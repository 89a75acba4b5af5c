/*
 * replication_guard.c: the tenants' replication roles (pg_allow_replication),
 * listed in pgpanel_guard.logical_replication_roles (the configuration file
 * only), may decode logically and never copy the server: BASE_BACKUP streams
 * its files, physical START_REPLICATION its WAL. Replication commands never
 * reach ProcessUtility; the one hook they pass is emit_log_hook, on the
 * "received replication command" line that log_replication_commands makes a
 * LOG: the guard turns that setting on for good. A listed role is not renamed
 * (that would take it off the list): role_guard.c asks here.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "replication/walsender.h"
#include "utils/elog.h"
#include "utils/guc.h"

#include "pgpanel_guard.h"

/* ------------------------------------------------------------------------
 * Logical replication only: pgpanel_guard.logical_replication_roles.
 * ------------------------------------------------------------------------
 */

static char *logical_replication_roles = NULL;
static NameList *logical_role_list = NULL;
static emit_log_hook_type prev_emit_log_hook = NULL;

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

	/*
	 * The command hook sees replication commands through their LOG line only:
	 * on for good (above the configuration file, which a reload re-reads).
	 */
	SetConfigOption("log_replication_commands", "on", PGC_POSTMASTER, PGC_S_OVERRIDE);
}
