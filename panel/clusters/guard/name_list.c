/*
 * name_list.c: parsing the guard's list settings into NameLists, and looking
 * a name up in one (see name_list.h).
 */
#include "postgres.h"

#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/varlena.h"

#include "name_list.h"

bool
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

bool
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
