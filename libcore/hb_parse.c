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

static bool id_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static bool id_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Appends id to *v (capacity *cap, *len used); false when it cannot grow. */
static bool id_push(int32_t **v, size_t *cap, size_t *len, int32_t id)
{
	if (*len == *cap) {
		size_t c = *cap ? 2 * *cap : 64;
		int32_t *g;
		if (c > SIZE_MAX / sizeof(int32_t) || !(g = realloc(*v, c * sizeof(int32_t))))
			return false;
		*v = g;
		*cap = c;
	}
	(*v)[(*len)++] = id;
	return true;
}

int hb_parse_id_list(const char *text, size_t len, int32_t **ids, size_t *n, size_t *bad_at)
{
	size_t i = 0, cap = 0, count = 0;
	int32_t *v = NULL;

	if (!text && len)
		return HB_ERR_INVALID;
	for (;;) {
		size_t start;
		uint64_t id = 0;
		while (i < len && id_space(text[i]))
			i++;
		start = i;
		/* an id must stand here: at the start, after a comma or white space */
		for (; i < len && id_digit(text[i]); i++) {
			id = id * 10 + (uint64_t)(text[i] - '0');
			if (id > INT32_MAX) {
				i = start;
				goto bad;
			}
		}
		if (i == start)
			goto bad;
		if (!id_push(&v, &cap, &count, (int32_t)id)) {
			free(v);
			return HB_ERR_NOMEM;
		}
		while (i < len && id_space(text[i]))
			i++;
		if (i == len)
			break;
		if (text[i] == ',')
			i++;
		else if (!id_digit(text[i]))
			goto bad; /* (a digit here follows white space: the next id) */
	}
	*ids = v;
	*n = count;
	return HB_OK;
bad:
	free(v);
	if (bad_at)
		*bad_at = i;
	return HB_ERR_INVALID;
}
