/*
 * qsa_ref.h: test-only references for QSA (AFN-011, AFN-016, AFN-017),
 * independent of the code under test: qsa_ref.c calls no libkern function
 * (no hb_dot, no hb_softmax) and computes in double.
 *
 *   scores     per complete group g: sum over index heads h of
 *              relu(iq_h . pooled_g), times 1/sqrt(dim) (the scale
 *              hb_qsa.h documents; a positive constant, so it never
 *              changes a selection).  ReLU is applied to each head's dot
 *              BEFORE the head sum (upstream's sum(ReLU(dot_h)), AFN-016).
 *   selection  a full sort of every group by (score descending, group
 *              ascending), keep the first `keep`, emit them in ascending
 *              group order, each expanded to its `ratio` tokens, then the
 *              incomplete tail (AFN-017).
 *   attention  softmax(q . k_i * scale) weighted values over exactly the
 *              given rows, the exponentials and sums in double.
 *
 * The dense form refuses more than 2,051 visible keys, the last length at
 * which dense and sparse visibility coincide for budget 2048 and ratio 4.
 */
#ifndef HB_TEST_QSA_REF_H
#define HB_TEST_QSA_REF_H

#include "hb_base.h"

#define QSA_DENSE_MAX_KEYS 2051u

/* Indexer scores in double for `groups` groups.  abs_out (may be NULL)
 * receives, per group, sum_h sum_i |iq_h,i * pooled_g,i| / sqrt(dim): the
 * magnitude a floating-point rounding error of the score scales with. */
void qsa_ref_scores(const float *iq, size_t heads, size_t dim, const float *pooled,
		    uint64_t groups, double *scores, double *abs_out);

/* Selection from double scores (see above); returns the row count. */
size_t qsa_ref_select_d(const double *scores, uint64_t groups, uint64_t keep, uint64_t ratio,
			uint64_t visible, int32_t *rows);
/* The same selection from float scores (widened exactly, same order). */
size_t qsa_ref_select(const float *scores, uint64_t groups, uint64_t keep, uint64_t ratio,
		      uint64_t visible, int32_t *rows);

/* Attention of one head over exactly rows[0..n-1] (K and V rows at
 * rows[i] * stride + offset, dim values each), in double; out[dim] is the
 * double result rounded once to float. */
void qsa_ref_attend(const float *q, const float *K, const float *V, size_t stride, size_t offset,
		    size_t dim, float scale, const int32_t *rows, size_t n, float *out);

/* Dense attention over rows 0..visible-1; -1 (and out untouched) past the ceiling. */
int qsa_ref_dense(const float *q, const float *K, const float *V, size_t stride, size_t offset,
		  size_t dim, float scale, uint64_t visible, float *out);

#endif
