/*
 * hb_parse.c: strict number parsing (see hb_parse.h).
 */
#include "hb_base.h"
#include "hb_err.h"
#include "hb_parse.h"

#include <math.h>

int hb_parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (!s || !*s)
		return HB_ERR_INVALID;
	for (const char *p = s; *p; p++) {
		unsigned d;
		if (*p < '0' || *p > '9')
			return HB_ERR_INVALID;
		d = (unsigned)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return HB_ERR_OVERFLOW;
		v = v * 10 + d;
	}
	*out = v;
	return HB_OK;
}

int hb_parse_u64_range(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	uint64_t v;
	int rc = hb_parse_u64(s, &v);
	if (rc)
		return rc;
	if (v < lo || v > hi)
		return HB_ERR_INVALID;
	*out = v;
	return HB_OK;
}

int hb_parse_double(const char *s, double *out)
{
	char *end = NULL;
	double v;

	if (!s || !*s || *s == ' ' || *s == '\t' || *s == '\n')
		return HB_ERR_INVALID;
	errno = 0;
	v = strtod(s, &end);
	if (errno == ERANGE || !end || *end != '\0' || !isfinite(v))
		return HB_ERR_INVALID;
	*out = v;
	return HB_OK;
}
