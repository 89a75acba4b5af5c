/*
 * name_list.h: the lists of names the guard's settings hold. Each setting is
 * a list of identifiers, parsed once, when the configuration is (re)loaded,
 * into a NameList kept as the setting's "extra" (NULL when empty): the hooks
 * compare names and never parse.
 *
 * The bottom of the guard: every concern file uses these, and they use none.
 */
#ifndef PGPANEL_GUARD_NAME_LIST_H
#define PGPANEL_GUARD_NAME_LIST_H

#include "postgres.h"

#include "utils/guc.h"

typedef struct NameList
{
	int			count;
	NameData	names[FLEXIBLE_ARRAY_MEMBER];
} NameList;

/* The check_hook of a list setting: parses it into the NameList its assign_hook receives. */
extern bool check_name_list(char **newval, void **extra, GucSource source);
extern bool name_listed(const NameList *list, const char *name);

#endif							/* PGPANEL_GUARD_NAME_LIST_H */
