/*
 * write_stop_functions.c: functions that write outside any relation the
 * executor checks: large objects (pg_largeobject) and WAL messages. Refused in
 * a stopped database when an expression calling one is set up (every call
 * goes through the object access hook).
 */
#include "postgres.h"

#include "catalog/objectaccess.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/fmgroids.h"

#include "pgpanel_guard.h"
#include "write_stop.h"

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
	if (access == OAT_FUNCTION_EXECUTE && function_grows_database(objectId) && database_is_readonly() &&
		!superuser())
		refuse_over_quota(true, current_database_name(),
						  "Writing large objects (lo_from_bytea, lo_create, lowrite, lo_put) and WAL messages "
						  "is refused; reading large objects and lo_unlink still work.");
}

void
write_stop_install_function_hook(void)
{
	prev_object_access_hook = object_access_hook;
	object_access_hook = pgpanel_guard_object_access;
}
