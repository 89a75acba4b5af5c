/*
 * write_stop.h: what the write stop's files share. write_stop.c holds the two
 * lists, who and what they stop, and the one refusal; the others call it:
 *
 *  - write_stop_executor.c: INSERT, UPDATE and COPY FROM, which the executor
 *    checks (a foreign key's action let through);
 *  - write_stop_statements.c: the utility statements that make new data or
 *    would shed a quota (the utility hook's entry, via pgpanel_guard.h);
 *  - write_stop_rewrites.c: VACUUM FULL and REINDEX, allowed unless a low
 *    fillfactor would make the rewrite larger;
 *  - write_stop_functions.c: large objects and WAL messages, written by
 *    functions outside any relation the executor checks.
 */
#ifndef PGPANEL_GUARD_WRITE_STOP_H
#define PGPANEL_GUARD_WRITE_STOP_H

#include "postgres.h"

#include "nodes/parsenodes.h"

/* What the checks need of a relation, in one catalog-cache lookup (owner InvalidOid when it is gone). */
typedef struct RelationFacts
{
	Oid			owner;
	char		relkind;
	bool		has_children;	/* relhassubclass: may be stale true, never stale false */
} RelationFacts;

/* write_stop.c: the lists */
extern bool database_listed(const char *name);
extern bool owner_listed(const char *name);
extern bool any_owner_stopped(void);
extern const char *current_database_name(void);
extern bool database_is_readonly(void);
extern const char *frozen_role(Oid roleid);

/* write_stop.c: the relations */
extern RelationFacts relation_facts(Oid relid);
extern const char *frozen_inheritor(Oid relid);
extern Oid	named_relation(RangeVar *relation);

/* write_stop.c: the one refusal, with SQLSTATE 53100 (disk_full) */
extern void refuse_over_quota(bool is_database, const char *name, const char *detail);
extern void refuse_database_write(void);
extern void refuse_owner_write(const char *role);

/* write_stop_rewrites.c */
extern void quota_vacuum(VacuumStmt *stmt);
extern void quota_reindex(ReindexStmt *stmt);

#endif							/* PGPANEL_GUARD_WRITE_STOP_H */
