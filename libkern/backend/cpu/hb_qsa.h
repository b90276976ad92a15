/*
 * hb_qsa.h: Qwen sparse attention as physical work (AFN-016, AFN-017).
 *
 * Selection scores every complete group of a query's visible run from the
 * group's pooled key (sum over index heads of relu(q_h . k) / sqrt(d)),
 * keeps the best budget/ratio groups by (score descending, group ascending)
 * with a bounded heap, emits them chronologically expanded to their tokens
 * and appends the incomplete tail.  Attention then gathers exactly those
 * rows and runs one softmax over them.  Work and memory per query scale
 * with the number of groups (scoring) plus the selected width (at most
 * budget + ratio - 1 rows), never with queries x keys; no mask exists.
 *
 * Model-free: these functions see arrays, so the long-context tests can
 * drive them at 262,144 visible tokens without running a model.
 */
#ifndef HB_QSA_H
#define HB_QSA_H

#include "hb_base.h"

/*
 * Select for one query.  iq: [heads][dim] index queries (normed, rotated);
 * pooled: [groups][dim] group keys (pooled, normed, rotated).  scores is
 * scratch for `groups` floats, heap scratch for `keep` entries.  rows
 * receives the selected rows (relative to the first live position),
 * chronological; returns their count (<= keep * ratio + ratio - 1).
 */
size_t hb_qsa_select(const float *iq, size_t heads, size_t dim, const float *pooled,
		     uint64_t groups, uint64_t keep, uint64_t ratio, uint64_t visible,
		     float *scores, int32_t *heap, int32_t *rows);

/*
 * Attention of one query head over exactly `n` gathered rows: K and V rows
 * at rows[i] * stride + offset, dim values each; probs is scratch for n.
 * out[dim] = softmax(q . k_i * scale) weighted values, in the rows' order.
 */
void hb_qsa_attend(const float *q, const float *K, const float *V, size_t stride, size_t offset,
		   size_t dim, float scale, const int32_t *rows, size_t n, float *probs, float *out);

#endif
