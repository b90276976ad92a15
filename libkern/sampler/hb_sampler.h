/*
 * hb_sampler.h: choosing the next token from a logits row.
 *
 * The physical logits row is wider than the vocabulary (AFN-005: the
 * released checkpoint has 248,320 rows for 248,077 token ids): every row
 * at or past `semantic` is masked BEFORE any selection, so an unassigned
 * row can never win, however large its logit.  Greedy takes the first
 * maximum; sampling applies temperature, then top-k, then top-p (nucleus),
 * and draws with a seeded generator, so a seed reproduces a run.
 */
#ifndef HB_SAMPLER_H
#define HB_SAMPLER_H

#include "hb_base.h"
#include "hb_err.h"

struct hb_sampler {
	bool greedy;
	float temperature;   /* > 0 */
	uint32_t top_k;      /* 0: no limit */
	float top_p;         /* (0, 1] */
	uint64_t state;      /* the generator, from the seed */
	/* scratch for sampling: semantic entries */
	float *probs;
	int32_t *order;
	size_t cap;
};

int hb_sampler_init(struct hb_sampler *s, bool greedy, float temperature, uint32_t top_k,
		    float top_p, uint64_t seed, size_t semantic, struct hb_error *err);
void hb_sampler_release(struct hb_sampler *s);
/* The next token id, in [0, semantic); -1 when semantic exceeds the rows
 * the sampler was initialised for (a caller bug, never a silent fallback). */
int32_t hb_sampler_next(struct hb_sampler *s, const float *logits, size_t semantic);

#endif
