/*
 * oracle.c: reading oracle arrays for tests (see oracle.h).
 */
#include "hb_base.h"
#include "hb_io.h"
#include "hb_json.h"
#include "harness.h"
#include "oracle.h"

#include <math.h>

bool oracle_open(struct oracle *o, const char *set)
{
	char path[4200];

	snprintf(o->dir, sizeof(o->dir), "%s/tests/fixtures/upstream/%s/oracle", hb_test_srcdir(), set);
	snprintf(path, sizeof(path), "%s/manifest.json", o->dir);
	o->manifest = NULL;
	return hb_json_parse_file(path, 64u << 20, &o->manifest, NULL) == HB_OK;
}

void oracle_close(struct oracle *o)
{
	cJSON_Delete(o->manifest);
	o->manifest = NULL;
}

void *oracle_array(const struct oracle *o, const char *name, size_t *n, uint64_t dims[4])
{
	const cJSON *a, *d;
	char path[4400], *data = NULL;
	size_t len = 0, k = 0;

	cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(o->manifest, "arrays")) {
		const cJSON *nm = cJSON_GetObjectItemCaseSensitive(a, "name");
		if (!cJSON_IsString(nm) || strcmp(nm->valuestring, name))
			continue;
		snprintf(path, sizeof(path), "%s/%s", o->dir,
			 cJSON_GetObjectItemCaseSensitive(a, "file")->valuestring);
		if (hb_read_file(path, 256u << 20, &data, &len, NULL))
			return NULL;
		for (int i = 0; i < 4; i++)
			dims[i] = 1;
		*n = 1;
		cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(a, "shape")) {
			if (k < 4)
				dims[k++] = (uint64_t)d->valuedouble;
			*n *= (size_t)d->valuedouble;
		}
		return data;
	}
	return NULL;
}

double oracle_max(double acc, double x)
{
	if (isnan(acc) || isnan(x))
		return NAN;
	return x > acc ? x : acc;
}

double oracle_max_abs_diff(const float *a, const float *b, size_t n)
{
	double m = 0;

	for (size_t i = 0; i < n; i++)
		m = oracle_max(m, fabs((double)a[i] - (double)b[i]));
	return m;
}

bool oracle_within(double err, double tol)
{
	return err <= tol; /* false for NaN: never `!(err > tol)` */
}

void oracle_check_err(const char *file, int line, const char *what, double err, double tol)
{
	if (!oracle_within(err, tol))
		hb_check_fail(file, line, "%s: error %.3g is not within the bound %.3g", what, err, tol);
}
