/*
 * qsa_ref.h: the test-only references for QSA (AFN-011): a selection that
 * sorts every group, and a dense attention over the whole visible run that
 * REFUSES more than 2,051 visible keys, the last length at which dense and
 * sparse visibility coincide for budget 2048 and ratio 4.
 */
#ifndef HB_TEST_QSA_REF_H
#define HB_TEST_QSA_REF_H

#include "hb_base.h"

#define QSA_DENSE_MAX_KEYS 2051u

/* Sort all groups by (score desc, index asc), keep `keep`, emit
 * chronologically with the tail; returns the row count. */
size_t qsa_ref_select(const float *scores, uint64_t groups, uint64_t keep, uint64_t ratio,
		      uint64_t visible, int32_t *rows);
/* Dense attention over rows 0..visible-1; -1 (and out untouched) past the ceiling. */
int qsa_ref_dense(const float *q, const float *K, const float *V, size_t stride, size_t offset,
		  size_t dim, float scale, uint64_t visible, float *out);

#endif
