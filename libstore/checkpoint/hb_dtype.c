/*
 * hb_dtype.c: the element-type table (see hb_dtype.h).  Lookup is a linear
 * scan: the list has seventeen entries and is consulted once per tensor.
 */
#include "hb_base.h"
#include "hb_dtype.h"

struct dtype_info {
	const char *name;
	unsigned size;
};

static const struct dtype_info dtypes[HB_DTYPE_COUNT_] = {
	[HB_DTYPE_INVALID] = { NULL, 0 },
#define HB_DTYPE_ROW_(sym, nm, sz) [HB_DTYPE_##sym] = { nm, sz },
	HB_DTYPE_LIST(HB_DTYPE_ROW_)
#undef HB_DTYPE_ROW_
};

int hb_dtype_from_name(const char *name, size_t len, enum hb_dtype *out)
{
	if (!name)
		return HB_ERR_NOTFOUND;
	for (int t = 1; t < HB_DTYPE_COUNT_; t++) {
		const char *n = dtypes[t].name;
		if (strlen(n) == len && memcmp(n, name, len) == 0) {
			*out = (enum hb_dtype)t;
			return HB_OK;
		}
	}
	return HB_ERR_NOTFOUND;
}

const char *hb_dtype_name(enum hb_dtype t)
{
	if ((int)t <= HB_DTYPE_INVALID || (int)t >= HB_DTYPE_COUNT_)
		return NULL;
	return dtypes[t].name;
}

unsigned hb_dtype_size(enum hb_dtype t)
{
	if ((int)t <= HB_DTYPE_INVALID || (int)t >= HB_DTYPE_COUNT_)
		return 0;
	return dtypes[t].size;
}
