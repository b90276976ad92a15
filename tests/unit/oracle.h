/*
 * oracle.h: read the upstream oracle fixtures (tests/fixtures/upstream/SET/
 * oracle/manifest.json and its raw arrays) in tests.
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

#endif
