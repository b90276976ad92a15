/*
 * oracle.h: read the upstream oracle fixtures (tests/fixtures/upstream/SET/
 * oracle/manifest.json and its raw arrays) in tests, and compare against
 * them so that a NaN can never pass.
 */
#ifndef HB_TEST_ORACLE_H
#define HB_TEST_ORACLE_H

#include "hb_base.h"
#include <cJSON.h>

struct oracle {
	char dir[4096];
	cJSON *manifest;
};

bool oracle_open(struct oracle *o, const char *set);
void oracle_close(struct oracle *o);
/* Load array `name` (heap, free it); *n receives the element count; dims
 * (up to 4) the shape.  NULL when absent. */
void *oracle_array(const struct oracle *o, const char *name, size_t *n, uint64_t dims[4]);

/*
 * NaN-aware error measures.  `e > max ? e : max` drops a NaN (every
 * comparison with NaN is false), and so does fmax; these keep it, so a
 * single NaN anywhere makes the whole maximum NaN, which no bound accepts.
 *
 * oracle_max: max(acc, x), NaN when either is NaN.
 * oracle_max_abs_diff: max |a[i] - b[i]| over i < n (0 for n == 0); NaN when
 *   any difference is NaN (a NaN on either side, or inf - inf), +inf when
 *   exactly one side is infinite.
 * oracle_within: err <= tol, written so that NaN is outside every bound.
 */
double oracle_max(double acc, double x);
double oracle_max_abs_diff(const float *a, const float *b, size_t n);
bool oracle_within(double err, double tol);
/* A failed CHECK (harness.h) naming what, the error and the bound, unless
 * oracle_within(err, tol). */
#define CHECK_ERR(what, err, tol) oracle_check_err(__FILE__, __LINE__, (what), (err), (tol))
void oracle_check_err(const char *file, int line, const char *what, double err, double tol);

#endif
