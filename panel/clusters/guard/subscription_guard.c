/*
 * subscription_guard.c: subscriptions and publications.
 *
 * A subscription holds a connection string, and its workers connect with it
 * as the cluster's operating-system user: whoever changes it points the
 * cluster at any address, with any password file of the server's. PostgreSQL
 * 15 lets only a superuser create one, but its owner may alter, rename and
 * drop it whatever its rights; the owner of an online migration's
 * subscriptions (pgpanel_migrate) is an ordinary role while the rows are
 * applied, and a tenant's trigger marked ENABLE ALWAYS runs as that role. So
 * no statement on a subscription is allowed to any role but a superuser: the
 * panel makes, enables and drops them as its own superuser.
 *
 * Publications are a tenant's to make (pg_allow_replication: a subscriber or
 * change data capture elsewhere reads them; PostgreSQL lets only a table's
 * owner publish it). They are refused to the panel's reserved roles only: code
 * the tenant gets run as one of them (the trigger above) makes and changes
 * none.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "utils/acl.h"

#include "pgpanel_guard.h"

#define ONLY_SUPERUSER_HINT \
	errhint("Only the control panel's superuser may do this.")

static bool
is_subscription_statement(Node *node)
{
	switch (nodeTag(node))
	{
		case T_CreateSubscriptionStmt:
		case T_AlterSubscriptionStmt:
		case T_DropSubscriptionStmt:
			return true;
		case T_RenameStmt:
			return ((RenameStmt *) node)->renameType == OBJECT_SUBSCRIPTION;
		case T_AlterOwnerStmt:
			return ((AlterOwnerStmt *) node)->objectType == OBJECT_SUBSCRIPTION;
		case T_CommentStmt:
			return ((CommentStmt *) node)->objtype == OBJECT_SUBSCRIPTION;
		default:
			return false;
	}
}

static bool
is_publication_statement(Node *node)
{
	switch (nodeTag(node))
	{
		case T_CreatePublicationStmt:
		case T_AlterPublicationStmt:
			return true;
		case T_DropStmt:
			return ((DropStmt *) node)->removeType == OBJECT_PUBLICATION;
		case T_RenameStmt:
			return ((RenameStmt *) node)->renameType == OBJECT_PUBLICATION;
		case T_AlterOwnerStmt:
			return ((AlterOwnerStmt *) node)->objectType == OBJECT_PUBLICATION;
		case T_CommentStmt:
			return ((CommentStmt *) node)->objtype == OBJECT_PUBLICATION;
		default:
			return false;
	}
}

bool
is_subscription_guarded(Node *node)
{
	return is_subscription_statement(node) || is_publication_statement(node);
}

void
guard_subscriptions(Node *node)
{
	const char *role;

	if (is_subscription_statement(node))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to create, change or drop a subscription"),
				 errdetail("Subscriptions are reserved by the control panel."),
				 ONLY_SUPERUSER_HINT));
	/* A publication: the tenant's own, unless the current role is one of the panel's. */
	role = GetUserNameFromId(GetUserId(), false);
	if (role_is_reserved(role))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to create, change or drop a publication as role \"%s\"", role),
				 errdetail("Role \"%s\" is reserved by the control panel.", role),
				 ONLY_SUPERUSER_HINT));
}
